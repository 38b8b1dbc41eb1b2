"""megatron.core.datasets.utils: get_blend_from_list."""


def get_blend_from_list(blend):
    """(prefixes, weights) from a --data-path list: ['p'] -> (['p'], None); ['w1', 'p1', 'w2', 'p2']
    -> (['p1', 'p2'], [w1, w2]); several prefixes without weights -> (prefixes, None); None or []
    -> None."""
    if not blend:
        return None
    if len(blend) % 2 == 1:
        return list(blend), None
    try:
        weights = [float(w) for w in blend[0::2]]
    except ValueError:
        return list(blend), None
    return [str(p).strip() for p in blend[1::2]], weights

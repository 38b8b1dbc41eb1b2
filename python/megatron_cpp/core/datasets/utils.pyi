"""
megatron.core.datasets.utils: get_blend_from_list.
"""
from __future__ import annotations
__all__: list[str] = ['get_blend_from_list']
def get_blend_from_list(blend):
    """
    (prefixes, weights) from a --data-path list: ['p'] -> (['p'], None); ['w1', 'p1', 'w2', 'p2']
        -> (['p1', 'p2'], [w1, w2]); several prefixes without weights -> (prefixes, None); None or []
        -> None.
    """

from enum import Enum
from typing import Dict, List

__version__: str
torch_version: str

class Launcher(Enum):
    NONE: int
    OPENMPI: int
    PMI: int
    TORCHRUN: int

class LauncherEnv:
    launcher: Launcher
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int
    @staticmethod
    def from_environment() -> "LauncherEnv": ...
    @staticmethod
    def from_variables(variables: Dict[str, str]) -> "LauncherEnv": ...

def init_logging(rank: int = 0, world_size: int = 1, level: str = "") -> None: ...
def rank_layout(world_size: int, tensor_model_parallel_size: int = 1,
                pipeline_model_parallel_size: int = 1,
                context_parallel_size: int = 1) -> Dict[str, List[List[int]]]: ...

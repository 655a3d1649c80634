# SPDX-License-Identifier: MIT
"""lmcache.v1.multiprocess.custom_types stand-in: IPCCacheServerKey, the
key of one transfer (a token range of one request, for one worker rank),
and RegisterEngineDrivenContextPayload. Fields in LMCache's order;
request_id takes no part in equality, cache_salt does."""
from dataclasses import dataclass, field


@dataclass(order=True, frozen=True)
class IPCCacheServerKey:
    model_name: str
    world_size: int
    worker_id: "int | None"
    token_ids: tuple
    start: int
    end: int
    request_id: str = field(compare=False)
    cache_salt: str = ""

    @classmethod
    def from_token_ids(cls, model_name: str, world_size: int,
                       worker_id: "int | None", token_ids: list,
                       start: int = 0, end: int = 0, request_id: str = "",
                       cache_salt: str = "") -> "IPCCacheServerKey":
        return cls(model_name=model_name, world_size=world_size,
                   worker_id=worker_id, token_ids=tuple(token_ids),
                   start=start, end=end, request_id=request_id,
                   cache_salt=cache_salt)

    def no_worker_id_version(self) -> "IPCCacheServerKey":
        raise NotImplementedError("stand-in")


@dataclass
class RegisterEngineDrivenContextPayload:
    instance_id: int
    model_name: str
    world_size: int
    block_size: int
    num_layers: int
    hidden_dim_size: int
    dtype_str: str
    use_mla: bool

# SPDX-License-Identifier: MIT
"""lmcache.v1.multiprocess.mq stand-in: MessageQueueClient, the worker's
request channel to LMCache's server (submit_request returns a future
whose result(timeout) is the response). The signature of submit_request
is that of the snapshot base.py and shm.py were read from (type, payload
list, response class); later LMCache passes one request message instead.
kvring.lmcache keeps the client and never calls it."""
from typing import Any


class MessageQueueClient:
    def __init__(self, server_url: str, context: Any) -> None:
        raise NotImplementedError("stand-in")

    def submit_request(self, request_type: Any, request_payloads: list,
                       response_class: Any) -> Any:
        raise NotImplementedError("stand-in")

    def close(self) -> None:
        raise NotImplementedError("stand-in")

# SPDX-License-Identifier: MIT
"""vllm.logger stand-in."""
import logging


def init_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)

# SPDX-License-Identifier: MIT
"""sglang.srt.metrics stand-in package."""

# SPDX-License-Identifier: MIT
"""sglang.srt stand-in package."""

# SPDX-License-Identifier: MIT
"""sglang.srt.mem_cache.storage stand-in package (SGLang's imports
the backend factory here; the stand-in does not, to stay free of logic)."""

"""Progress bars (tqdm) for warm() and a cold pass of a SampleStream: when they show, and the bar itself."""

import os
import sys
import typing


def wanted(progress: typing.Optional[bool]) -> bool:
    """progress=True or False decides; None: a bar when stderr is a terminal and DATAVO_DISABLE_PROGRESS_BARS is not
    set (as huggingface_hub does with HF_HUB_DISABLE_PROGRESS_BARS). Without tqdm there is never a bar."""
    if progress is not None:
        return progress
    if os.environ.get("DATAVO_DISABLE_PROGRESS_BARS", "").strip().lower() not in ("", "0", "false", "no", "off"):
        return False
    return sys.stderr is not None and sys.stderr.isatty()


def bar(total: int, description: str, unit: str) -> typing.Any:
    """A tqdm bar on stderr, or None when tqdm cannot be imported (Debian: python3-tqdm)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=description, unit=unit, file=sys.stderr, leave=True)

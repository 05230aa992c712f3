# spec 001, "Quick start (local)" (verbatim).
from datavo_sdk import SampleStream

# First pass: shards fetched from the server and cached.
for sample in SampleStream.from_dataset("voice_demo_v1/train", keys=["audio.wav"]):
    ...

# Second pass, even in a new process: served from local disk, no server traffic.
for sample in SampleStream.from_dataset("voice_demo_v1/train", keys=["audio.wav"]):
    ...

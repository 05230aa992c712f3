"""Sample: what iterating a SampleStream yields."""

import typing

#: A field of a sample: a zero-copy view into the mapped shard, or bytes (copy=True, pickled samples). "__key__"
#: holds the sample id, a str.
Field = typing.Union[memoryview, bytes]


class Sample(typing.Dict[str, typing.Any]):
    """One sample: a dict keyed by member key (``sample["audio.wav"]``) plus ``"__key__"``, the sample id
    (WebDataset's convention), also available as ``sample.id``.

    Field values are zero-copy, read-only ``memoryview`` objects into the mapped shard file (``bytes`` with
    ``SampleStream.from_dataset(..., copy=True)``). Lifetime: a field is valid for as long as the sample or the view
    itself is referenced, even after the stream is closed or the cache entry is evicted (it keeps the shard
    mapped). ``release()`` (or leaving ``with sample:``) ends it early: the views are released, and any later use
    of one raises ``ValueError`` ("operation forbidden on released memoryview object"), never a crash. A view that
    is still exported (e.g. to a numpy array) stays valid, and keeps the shard mapped, until that export goes.

    Samples pickle (for DataLoader workers): their fields become ``bytes``. ``to_bytes()`` does the same copy.
    """

    __slots__ = ()

    @property
    def id(self) -> str:
        """The sample id, e.g. ``"train/utt_0001"``."""
        return str(self["__key__"])

    def to_bytes(self) -> typing.Dict[str, typing.Any]:
        """A plain dict of the same keys with every field copied into ``bytes``."""
        return {k: (v.tobytes() if isinstance(v, memoryview) else v) for k, v in self.items()}

    def release(self) -> None:
        """Releases the field views now (see the class docstring). Idempotent."""
        for value in self.values():
            if isinstance(value, memoryview):
                try:
                    value.release()
                except BufferError:
                    pass  # still exported (numpy, ...): it stays valid and keeps the shard mapped

    def __enter__(self) -> "Sample":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __reduce__(self) -> typing.Tuple[typing.Any, ...]:
        return (Sample, (self.to_bytes(),))

    def __repr__(self) -> str:
        def describe(value: typing.Any) -> str:
            try:
                return "%d bytes" % len(value)
            except (TypeError, ValueError):  # not sized, or a released view
                return "released" if isinstance(value, memoryview) else repr(value)

        fields = ", ".join("%s: %s" % (k, describe(v)) for k, v in self.items() if k != "__key__")
        return "Sample(%r, {%s})" % (self.get("__key__"), fields)

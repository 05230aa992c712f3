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


class Batch(typing.Dict[str, typing.Any]):
    """A batch of samples from :meth:`SampleStream.batches`: a dict with ``"__key__"``, the list of sample ids, and one
    entry per key, ready for collation (``DataLoader(stream.batches(64), batch_size=None)`` turns the arrays into
    tensors).

    - A key whose fields are stacked (see ``fixed``) is one 2-D array of ``uint8``, shape ``(samples, field size)``: a
      NumPy array when NumPy is importable, else a 2-D ``memoryview``. It is a zero-copy view of the mapped shard
      (read-only, strided) when the batch's fields lie at one stride in one shard, as a tar of fixed-size members
      lays them out, and a contiguous copy otherwise (a batch across two shards). With ``copy=True`` it is always a
      writable contiguous copy. ``torch.from_numpy`` warns on a read-only array: pass ``copy=True``, or copy it.
    - Any other key is a list of fields, one per sample, as :class:`Sample` gives them (memoryviews, or bytes with
      ``copy=True``).

    Batches pickle (for DataLoader workers): memoryviews become bytes, arrays stay arrays.
    """

    __slots__ = ()

    @property
    def ids(self) -> typing.List[str]:
        """The sample ids, in stream order."""
        return typing.cast(typing.List[str], self["__key__"])

    @property
    def num_samples(self) -> int:
        """The number of samples in the batch (``len()`` of a Batch counts its keys, as for any dict)."""
        return len(self["__key__"])

    def __reduce__(self) -> typing.Tuple[typing.Any, ...]:
        fields: typing.Dict[str, typing.Any] = {}
        shapes: typing.Dict[str, typing.Tuple[int, ...]] = {}
        for key, value in self.items():
            if isinstance(value, memoryview):  # a 2-D array without NumPy: bytes, and the shape to cast them back to
                fields[key], shapes[key] = value.tobytes(), tuple(value.shape or ())
            elif isinstance(value, list):
                fields[key] = [v.tobytes() if isinstance(v, memoryview) else v for v in value]
            else:
                fields[key] = value
        return (_rebuild_batch, (fields, shapes))

    def __repr__(self) -> str:
        def describe(value: typing.Any) -> str:
            shape = getattr(value, "shape", None)
            if shape is not None:
                return "array %s" % "x".join(str(d) for d in shape)
            return "%d fields" % len(value)

        fields = ", ".join("%s: %s" % (k, describe(v)) for k, v in self.items() if k != "__key__")
        return "Batch(%d samples, {%s})" % (self.num_samples, fields)


def _rebuild_batch(
    fields: typing.Dict[str, typing.Any], shapes: typing.Dict[str, typing.Tuple[int, ...]]
) -> Batch:
    batch = Batch(fields)
    for key, shape in shapes.items():
        batch[key] = memoryview(fields[key]).cast("B", shape)
    return batch

"""Reads a TensorBoard event directory with the tensorboard package and prints what it saw as
JSON: scalars per tag as [step, value], images and audio per tag with their metadata; the
encoded image/audio bytes are written next to the events as <tag with / as _>.<step>.bin so
the C++ test can compare them byte for byte."""
import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator


def main(logdir):
    acc = event_accumulator.EventAccumulator(
        logdir, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.IMAGES: 0,
                               event_accumulator.AUDIO: 0})
    acc.Reload()
    tags = acc.Tags()
    out = {"scalars": {}, "images": {}, "audio": {}}
    for tag in tags["scalars"]:
        out["scalars"][tag] = [[e.step, e.value] for e in acc.Scalars(tag)]

    def blobs(tag, events, payload, fields):
        # Each event's encoded bytes to <tag>.<step>.bin beside the log, with its fields.
        rows = []
        for e in events:
            name = os.path.join(logdir, "%s.%d.bin" % (tag.replace("/", "_"), e.step))
            with open(name, "wb") as f:
                f.write(payload(e))
            rows.append(dict(step=e.step, file=name, **fields(e)))
        return rows

    for tag in tags["images"]:
        out["images"][tag] = blobs(tag, acc.Images(tag), lambda e: e.encoded_image_string,
                                   lambda e: {"width": e.width, "height": e.height})
    for tag in tags["audio"]:
        out["audio"][tag] = blobs(tag, acc.Audio(tag), lambda e: e.encoded_audio_string,
                                  lambda e: {"sample_rate": e.sample_rate, "frames": e.length_frames,
                                             "content_type": e.content_type})
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])

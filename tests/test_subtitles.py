"""Subtitles read as the words said: cue numbers, timings, settings and styling dropped,
so one clip's subtitles re-timed or re-styled read the same; broken files refused."""

from __future__ import annotations

import pytest

from mmdedup.extract.subtitles import SubtitleError, parse_srt, parse_subtitles, parse_vtt, stream_subtitles

SRT = ("1\r\n00:00:01,000 --> 00:00:02,500\r\n<i>Hello</i> there,\r\n{\\an8}old friend\r\n\r\n"
       "2\r\n00:00:03,000 --> 00:00:04,000\r\nWhere to?\r\n")
VTT = ("WEBVTT - a title\n\nNOTE written by hand\n\nintro\n00:01.000 --> 00:02.500 align:start\n"
       "<v Ann>Hello</v> there,\nold friend\n\n00:00:03.000 --> 00:00:04.000\n<c.loud>Where to?</c>\n")


def test_srt_and_vtt_of_the_same_words_read_alike() -> None:
    assert parse_srt(SRT) == "Hello there, old friend\nWhere to?"
    assert parse_vtt(VTT) == parse_srt(SRT)
    assert parse_subtitles(SRT, "x.SRT") == parse_subtitles(VTT, "x.vtt")


@pytest.mark.parametrize("text, parse", [
    ("1\nnot a timing\nHello\n", parse_srt),
    ("1\n00:00:01,000 --> 00:00:02,000\n\n", parse_srt),  # no cue with words
    ("", parse_srt),
    ("00:01.000 --> 00:02.000\nHello\n", parse_vtt),  # no WEBVTT header
    ("WEBVTT\n\nid\nHello\n", parse_vtt),
])
def test_broken_subtitles_refused(text, parse) -> None:
    with pytest.raises(SubtitleError) as err:
        parse(text)
    assert err.value.reason == "bad_subtitles"


def test_stream_subtitles_of_a_file_without_them(photos) -> None:
    from helpers import clip, encode

    assert stream_subtitles(encode(clip(photos["rocket"], photos["camera"], seconds=1.0))) is None
    assert stream_subtitles(b"not a video") is None

"""Every reason a failure row can carry, with its meaning: the one list the README's
table of failure reasons follows (tests/test_bad_input.py holds them to each other and
to every reason the code raises).

Scripts match on the reason; the row's detail says which field, file or line and why.
"""

from __future__ import annotations

REASONS: dict[str, str] = {
    # A manifest line or a record.
    "malformed_json": "a manifest line is not JSON, or not a JSON object",
    "too_deep": "a manifest line, or an item's meta, nests more than `max_meta_depth` levels",
    "bad_number": "NaN or Infinity (not JSON), a number out of range, or an integer of over "
                  "4,300 digits",
    "invalid_unicode": "a string holds a lone UTF-16 surrogate (such as \\ud800), which is no "
                       "character",
    "nul_character": "a string holds the NUL character (U+0000), which PostgreSQL cannot store",
    "missing_id": "the record has no \"id\" (a non-empty string or an integer)",
    "invalid_field": "a field has the wrong type, is unknown, or the id is over 512 characters",
    "duplicate_id": "the id appeared earlier in the same manifest or batch (the first is kept)",
    # Files a record names, or a folder holds.
    "missing_file": "a named file does not exist",
    "unreadable_file": "a file cannot be read, or is not a regular file",
    "path_escape": "a path leads outside the manifest's or folder's folder, directly or "
                   "through a symbolic link",
    "symlink_loop": "a path runs into a loop of symbolic links",
    "invalid_file_name": "a file name in a folder is not valid UTF-8 (rename the file)",
    "changed_file": "a stored picture's file, read again to sign it under a new release, "
                    "is not the one ingested (its sha256 differs; ingest it again)",
    "unsupported_type": "a folder holds a file of an extension no item kind reads, or a link "
                        "to a folder (not followed)",
    "invalid_utf8": "a manifest line or a text file is not valid UTF-8",
    "empty_content": "an empty file, a page without main text, or an item with nothing in it",
    "too_large": "a line, text, file or picture over its limit (`max_manifest_line_bytes`, "
                 "`max_text_chars`, `max_file_bytes`, `max_image_pixels`)",
    # Pictures.
    "not_an_image": "the file is no picture format Pillow reads",
    "corrupt_image": "the picture's data is damaged or truncated",
    "unsupported_image": "a picture mode that cannot be brought to RGB",
    # Web pages.
    "malformed_page": "the page cannot be parsed, or its DOCTYPE declares entities",
    "page_too_deep": "the page nests more than `max_page_depth` elements",
    "page_too_large": "the page is over `max_page_chars` characters",
    "undecodable_page": "the page's bytes decode under no charset (binary data)",
    "empty_page": "the page holds no markup at all",
    "page_error": "extracting the page failed unexpectedly (the detail names the error)",
    # Videos.
    "unreadable_video": "the video file cannot be read",
    "empty_video": "the video file is empty",
    "video_too_large": "the video file is over `max_file_bytes`, or its frames are over the "
                       "frame size limit",
    "corrupt_video": "the video cannot be opened or no frame of it decodes",
    "no_video_stream": "the file holds no video stream (audio only, or cover art)",
    "bad_subtitles": "the `subtitles` file is not valid SubRip (`.srt`) or WebVTT (`.vtt`)",
    "video_too_long": "the video is longer than `max_video_seconds`",
}

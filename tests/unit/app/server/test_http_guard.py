"""Which request framing the guarded protocol refuses, and how it says so."""

from __future__ import annotations

import pytest

from app.server.http_guard import framing_problem


def test_one_host_and_plain_or_chunked_bodies_pass():
    assert framing_problem(1, []) is None
    assert framing_problem(1, [b"chunked"]) is None
    assert framing_problem(1, [b" Chunked "]) is None
    assert framing_problem(0, []) is None  # HTTP/1.0 clients may send none


def test_two_hosts_are_refused_with_the_rfc_named():
    status, message = framing_problem(2, [])
    assert status.startswith(b"400")
    assert "2 Host headers" in message and "RFC 9112" in message


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ([b"gzip, chunked"], "Transfer-Encoding gzip is not supported: use Content-Encoding: gzip"),
        ([b"gzip", b"chunked"], "Transfer-Encoding gzip is not supported: use Content-Encoding"),
        ([b"deflate,chunked"], "use Content-Encoding: deflate"),
        ([b"identity"], "send the body with Content-Length or Transfer-Encoding: chunked"),
        ([b"chunked, chunked"], "Transfer-Encoding chunked, chunked is not supported"),
    ],
)
def test_any_transfer_encoding_but_chunked_is_refused(values, words):
    status, message = framing_problem(1, values)
    assert status.startswith(b"501")
    assert words in message


@pytest.mark.parametrize("values", [[b","], [b" , ,"], [b""], [b",", b" "]])
def test_an_empty_transfer_encoding_is_a_400_that_says_what_to_send(values):
    status, message = framing_problem(1, values)
    assert status.startswith(b"400")
    assert message == "Transfer-Encoding is empty: send chunked, or use Content-Length"

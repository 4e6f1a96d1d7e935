"""Name and label validation: same verdicts and same messages as upstream's validation.go."""

from __future__ import annotations

import pytest

from kse.objects import names

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
    "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
KEY_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


@pytest.mark.parametrize(
    "good",
    [
        "a",
        "ab",
        "abc",
        "a1",
        "a-1",
        "a--1--2--b",
        "0",
        "01",
        "012",
        "1a",
        "1-a",
        "1--a--b--2",
        "a.a",
        "ab.a",
        "a1.a",
        "a-1.a",
        "a--1--2--b.a",
        "0.a",
        "1--a--b--2.a",
        "a.1",
        "a--1--2--b.0--a",
        "0.1",
        "1--a--b--2.a.b",
        "a" * 253,
        "10.240.79.157",
    ],
)
def test_dns1123_subdomain_valid(good: str) -> None:
    assert names.is_dns1123_subdomain(good) == []


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "A",
        "ABC",
        "aBc",
        "A1",
        "A-1",
        "1-A",
        "-",
        "a-",
        "-a",
        "1-",
        "-1",
        "_",
        "a_",
        "_a",
        "a_b",
        "1_",
        "_1",
        "1_2",
        ".",
        "a.",
        ".a",
        "a..b",
        "1.",
        ".1",
        "1..2",
        " ",
        "a ",
        " a",
        "a b",
        "1 ",
        " 1",
        "1 2",
        "A.a",
        "aB.a",
        "ab.A",
        "A1.a",
        "a1.A",
        "A.1",
        "aB.1",
        "A1.A",
        "1A.a",
        "1a.A",
        "a@b",
        "a,b",
        "a_b",
        "a;b",
        "a:b",
        "a%b",
        "a?b",
        "a$b",
        "a" * 254,
        "abc\n",
    ],
)
def test_dns1123_subdomain_invalid(bad: str) -> None:
    assert names.is_dns1123_subdomain(bad)


def test_dns1123_subdomain_messages() -> None:
    assert names.is_dns1123_subdomain("Foo") == [SUBDOMAIN_MSG]
    assert names.is_dns1123_subdomain("a" * 254) == ["must be no more than 253 characters"]


def test_dns1123_label() -> None:
    assert names.is_dns1123_label("my-namespace") == []
    assert names.is_dns1123_label("a" * 63) == []
    assert names.is_dns1123_label("a" * 64) == ["must be no more than 63 characters"]
    assert names.is_dns1123_label("a.b") == ["must not contain dots"]
    assert names.is_dns1123_label("My_NS") == [LABEL_MSG]


def test_dns1035_label() -> None:
    assert names.is_dns1035_label("abc-123") == []
    assert names.is_dns1035_label("1abc") != []


@pytest.mark.parametrize(
    "good",
    [
        "simple",
        "now-with-dashes",
        "1-starts-with-num",
        "1234",
        "simple/simple",
        "now-with-dashes/simple",
        "now-with-dashes/now-with-dashes",
        "now.with.dots/simple",
        "now-with.dashes-and.dots/simple",
        "1-num.2-num/3-num",
        "1234/5678",
        "1.2.3.4/5678",
        "Uppercase_Is_OK_123",
        "example.com/Uppercase_Is_OK_123",
        "requests.storage-foo",
        "a" * 63,
        "a" * 253 + "/" + "b" * 63,
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "example.com/dongle",
    ],
)
def test_label_key_valid(good: str) -> None:
    assert names.is_qualified_name(good) == []
    assert names.is_label_key(good) == []


@pytest.mark.parametrize(
    "bad",
    [
        "nospecialchars%^=@",
        "cantendwithadash-",
        "-cantstartwithadash-",
        "only/one/slash",
        "Example.com/abc",
        "example_com/abc",
        "example.com/",
        "/simple",
        "a" * 64,
        "a" * 254 + "/abc",
        "",
        "invalid key",
    ],
)
def test_label_key_invalid(bad: str) -> None:
    assert names.is_label_key(bad)


def test_label_key_messages() -> None:
    assert names.is_label_key("invalid key") == [KEY_NAME_MSG]
    assert names.is_label_key("/simple") == ["prefix part must be non-empty"]
    assert names.is_label_key("a" * 64) == ["name part must be no more than 63 bytes"]
    assert names.is_label_key("Example.com/abc") == ["prefix part " + SUBDOMAIN_MSG]
    assert names.is_label_key("a/b/c")[0].startswith("a valid label key must consist of alphanumeric")
    assert names.is_label_key("")[0] == "name part must be non-empty"


def test_label_values() -> None:
    for good in [
        "",
        "simple",
        "now-with-dashes",
        "1-starts-with-num",
        "end-with-num-1",
        "1234",
        "a" * 63,
        "MixedCase",
        "with_underscore",
        "1.2.3",
    ]:
        assert names.is_valid_label_value(good) == [], good
    for bad in [
        "nospecialchars%^=@",
        "Tama-nui-te-rā.is.Māori.sun",
        "\\backslashes\\are\\bad",
        "-starts-with-dash",
        "ends-with-dash-",
        ".starts.with.dot",
        "ends.with.dot.",
        "a" * 64,
        "a b",
    ]:
        assert names.is_valid_label_value(bad), bad
    assert names.is_valid_label_value("a" * 64) == ["must be no more than 63 bytes"]
    assert names.is_valid_label_value("x y")[0].startswith("a valid label must be an empty string or consist")


def test_lengths_count_bytes() -> None:
    # "é" is two bytes; both limits are byte limits in Go.
    assert "must be no more than 63 bytes" in names.is_valid_label_value("é" * 32)


def test_prefixed_label_key() -> None:
    assert names.is_prefixed_label_key("example.com/foo") == []
    assert names.is_prefixed_label_key("foo") == ["must include a prefix (e.g. 'example.com/key')"]


def test_validate_labels_names_the_key() -> None:
    errs = names.validate_labels({"ok": "fine", "bad key": "v", "k": "bad value"})
    assert any("'bad key'" in e for e in errs)
    assert any("'bad value'" in e and "'k'" in e for e in errs)
    assert not any("'ok'" in e for e in errs)


def test_validate_object_name() -> None:
    assert names.validate_object_name("web-0") == []
    assert names.validate_object_name("a.b", namespace=True) == ["must not contain dots"]
    assert names.validate_object_name("") == ["name or generateName is required"]

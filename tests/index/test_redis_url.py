"""The Redis URL forms the index accepts (``kvgate.index.redis_url``), parsed without connecting,
and the masking that keeps passwords out of every message."""

from __future__ import annotations

import pytest

from kvgate.index.redis_url import RedisUrlError, mask_url, node_options, parse_sentinel_url


def test_a_sentinel_url_lists_sentinels_service_and_database() -> None:
    url = "redis+sentinel://app:p%40ss@s1,s2:26380,[::1]:26381/kv%20gate/2?socket_timeout=0.5"
    parsed = parse_sentinel_url(url)
    assert parsed.sentinels == (("s1", 26379), ("s2", 26380), ("::1", 26381))
    assert parsed.service == "kv gate"
    assert parsed.primary == {"username": "app", "password": "p@ss", "db": 2, "socket_timeout": 0.5}
    assert parsed.sentinel == {"socket_timeout": 0.5}  # no database, no credentials of the primary


def test_sentinels_with_credentials_of_their_own_and_tls() -> None:
    url = "rediss+sentinel://:pw@s1/svc?sentinel_password=spw&sentinel_username=ops&ssl_ca_certs=/ca.pem"
    parsed = parse_sentinel_url(url)
    assert parsed.primary == {"password": "pw", "db": 0, "ssl_ca_certs": "/ca.pem", "ssl": True}
    assert parsed.sentinel == {"ssl_ca_certs": "/ca.pem", "ssl": True, "username": "ops", "password": "spw"}


def test_node_urls_keep_redis_py_meanings() -> None:
    assert node_options("redis://h:7000/3")["db"] == 3
    assert node_options("rediss://h")["connection_class"].__name__ == "SSLConnection"
    assert node_options("unix:///run/redis.sock?db=1") | {"connection_class": None} == {
        "path": "/run/redis.sock", "db": 1, "connection_class": None,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://u:pw@h:1/0", "redis://u:***@h:1/0"),
        ("redis://:pw@h", "redis://:***@h"),
        ("redis://token@h", "redis://***@h"),  # a lone userinfo may be a secret too
        ("redis://u:p@w/x?y@h/0", "redis://u:***@h/0"),  # unencoded @, / and ? in a password
        ("redis+sentinel://u:pw@s1,s2/svc?sentinel_password=spw&db=1",
         "redis+sentinel://u:***@s1,s2/svc?sentinel_password=***&db=1"),
        ("redis://h/0?password=pw", "redis://h/0?password=***"),
        ("redis://h:6379/0", "redis://h:6379/0"),
        ("not a url", "not a url"),
    ],
)  # fmt: skip
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_url_errors_name_the_masked_url_and_the_reason() -> None:
    with pytest.raises(RedisUrlError) as caught:
        node_options("redis://:pw@h:port/0")
    assert str(caught.value) == "redis://:***@h:port/0: the port must be a number in 1..65535"

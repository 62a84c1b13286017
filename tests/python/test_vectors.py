"""Every vector of tests/vectors/*.json, through the binding: hashes and indexes, Redisson's sizing
(accepted and rejected rows, Redisson's messages), and Redisson's own bitmap + config example byte
for byte as a raw GET / HGETALL sees it."""
from __future__ import annotations

import math

import pytest

import bloomguard
from conftest import load_vectors

HASH = load_vectors("redisson_hash_vectors.json")
PARAMS = load_vectors("redisson_params.json")
BITMAP = load_vectors("redisson_bitmap_example.json")

CASES = HASH["cases"]
CONFIGS = {c["name"]: (c["size"], c["k"]) for c in HASH["configs"]}


def test_vector_files_are_complete():
    assert len(CASES) == HASH["count"] == 43
    assert len(PARAMS["rows"]) >= 40
    assert any(r["tryInit"] != "ok" for r in PARAMS["rows"])
    assert PARAMS["max_size"] == bloomguard.MAX_SIZE


def _item_bytes(case: dict) -> bytes:
    data = bytes.fromhex(case["item_hex"])
    assert len(data) == case["len"]
    return data


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_hash128(case):
    data = _item_bytes(case)
    h1, h2 = bloomguard.hash128(data)
    assert "%016x" % h1 == case["hash1_hex"]
    assert "%016x" % h2 == case["hash2_hex"]
    # the JSON's signed decimals are Java longs: same bits
    assert h1 == int(case["hash1"]) % 2**64 and h2 == int(case["hash2"]) % 2**64
    assert 0 <= h1 < 2**64 and 0 <= h2 < 2**64
    # every accepted item type gives the same hash
    assert bloomguard.hash128(bytearray(data)) == (h1, h2)
    assert bloomguard.hash128(memoryview(data)) == (h1, h2)
    if case["text"] is not None:
        assert case["text"].encode("utf-8") == data
        assert bloomguard.hash128(case["text"]) == (h1, h2)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_indexes(case):
    data = _item_bytes(case)
    for name, want in case["indexes"].items():
        size, k = CONFIGS[name]
        assert bloomguard.indexes(data, size, k) == want
        if case["text"] is not None:
            assert bloomguard.indexes(case["text"], size, k) == want


def _redisson_reject_message(row: dict) -> str:
    if "size is 0" in row["tryInit"]:
        return "Bloom filter calculated size is 0"
    return "Bloom filter size can't be greater than 4294967294. But calculated size is %d" % row["size"]


ROWS = PARAMS["rows"]
ROW_IDS = ["n=%s,p=%s" % (r["n"], r["p"]) for r in ROWS]


@pytest.mark.parametrize("row", ROWS, ids=ROW_IDS)
def test_optimal_params(row):
    n, p = row["n"], float(row["p"])
    if row["tryInit"] == "ok":
        assert bloomguard.optimal_params(n, p) == (row["size"], row["k"])
    else:
        with pytest.raises(bloomguard.BadParams) as ei:
            bloomguard.optimal_params(n, p)
        assert ei.value.code == bloomguard.BadParams.status
        assert isinstance(ei.value, bloomguard.InvalidArgument) and isinstance(ei.value, ValueError)


@pytest.mark.parametrize("row", ROWS, ids=ROW_IDS)
def test_params_through_init(client, fname, raw, row):
    """tryInit with every row: the config Redisson would write, or Redisson's exact message."""
    n, p = row["n"], float(row["p"])
    with client.filter(fname) as f:
        if row["tryInit"] == "ok":
            try:
                assert f.init(n, p) is True
                info = f.info()
                assert (info.size, info.hash_iterations) == (row["size"], row["k"])
                assert info.expected_insertions == n
                assert info.false_probability == p
                cfg = raw.hgetall("{%s}:config" % fname)
                assert cfg["size"] == str(row["size"]) and cfg["hashIterations"] == str(row["k"])
                assert cfg["expectedInsertions"] == str(n)
                assert cfg["falseProbability"] == row["p"]  # Java's Double.toString
            finally:
                f.delete()
        else:
            with pytest.raises(bloomguard.BadParams) as ei:
                f.init(n, p)
            # Redisson's message, after the library's "init: " context
            assert ei.value.message.endswith(_redisson_reject_message(row)), ei.value.message
            assert str(ei.value) == ei.value.message
            assert ei.value.code == bloomguard.BadParams.status
            assert raw("EXISTS", "{%s}:config" % fname) == 0


@pytest.mark.parametrize("n,p,message", [
    (1000, 1.0000000000000002, "Bloom filter false probability can't be greater than 1"),
    (1000, math.inf, "Bloom filter false probability can't be greater than 1"),
    (1000, -1e-300, "Bloom filter false probability can't be negative"),
    (0, 2.0, "Bloom filter false probability can't be greater than 1"),
    (1000, math.nan, "Bloom filter calculated size is 0"),
    (0, 0.01, "Bloom filter expected insertions must be positive, got 0"),
    (-5, 0.01, "Bloom filter expected insertions must be positive, got -5"),
    (2**63 - 1, 0.5, "Bloom filter size can't be greater than 4294967294. But calculated size is "
                     "9223372036854775807"),
])
def test_init_rejections(client, fname, n, p, message):
    with client.filter(fname) as f, pytest.raises(bloomguard.BadParams) as ei:
        f.init(n, p)
    assert ei.value.message.endswith(message), ei.value.message


def test_bitmap_example(client, raw):
    """Redisson's tryInit(100, 0.01) + 5 adds: the same bitmap bytes and config fields."""
    name = BITMAP["redis_keys"]["bitmap"]
    config_key = BITMAP["redis_keys"]["config_hash"]
    raw("DEL", name, config_key)
    f = client.filter(name)
    try:
        fil = BITMAP["filter"]
        assert f.init(fil["expectedInsertions"], fil["falseProbability"]) is True
        assert f.info() == (fil["size"], fil["k"], fil["expectedInsertions"], fil["falseProbability"])
        for item in BITMAP["items"]:
            assert bloomguard.indexes(item["text"], fil["size"], fil["k"]) == item["indexes"]
            assert "%016x" % bloomguard.hash128(item["text"])[0] == item["hash1_hex"]
            assert f.add(item["text"]) is (item["newly_set_bits"] > 0)
        got = raw("GET", name)
        assert len(got) == BITMAP["bitmap_redis_len"]
        assert got == bytes.fromhex(BITMAP["bitmap_redis_hex"])
        assert sum(bin(b).count("1") for b in got) == BITMAP["set_bit_count"]
        want = {k: v for k, v in BITMAP["config_hash"]["fields_for_this_filter"].items()
                if k in ("size", "hashIterations", "expectedInsertions", "falseProbability")}
        assert len(want) == 4
        got_cfg = raw.hgetall(config_key)  # fields of bloomguard's own are allowed beside these
        assert {k: got_cfg.get(k) for k in want} == want
        assert all(item["text"] in f for item in BITMAP["items"])
        size, k, bits = fil["size"], fil["k"], BITMAP["set_bit_count"]
        assert f.count() == round(-size / k * math.log(1 - bits / size))
        # the same items as raw bytes (ByteArrayCodec) through add_many: the same bitmap
        assert f.delete() is True
        assert f.init(fil["expectedInsertions"], fil["falseProbability"]) is True
        added = f.add_many(bytes.fromhex(item["item_hex"]) for item in BITMAP["items"])
        assert added == len(BITMAP["items"])
        assert raw("GET", name) == bytes.fromhex(BITMAP["bitmap_redis_hex"])
        assert f.contains_many([item["text"] for item in BITMAP["items"]]) == [True] * 5
    finally:
        f.delete()
        f.close()


FORMATS = BITMAP["config_hash"]["falseProbability_formatting"]


@pytest.mark.parametrize("row", FORMATS, ids=[r["p"] for r in FORMATS])
def test_false_probability_text(client, fname, raw, row):
    """falseProbability is written as Java's Double.toString, and both that and Redisson < 3.30's
    plain decimal (BigDecimal.toPlainString) read back as the same number."""
    p = float(row["p"])
    key = "{%s}:config" % fname
    with client.filter(fname) as f:
        try:
            if p < 1.0:  # p == 1 gives size 0: tryInit rejects it
                assert f.init(1000, p) is True
                assert raw("HGET", key, "falseProbability").decode() == row["Double_toString_redisson_ge_3_30_0"]
            else:
                raw("HSET", key, "size", "10", "hashIterations", "1", "expectedInsertions", "1000")
            for text in (row["Double_toString_redisson_ge_3_30_0"],
                         row["BigDecimal_valueOf_toPlainString_redisson_lt_3_30_0"]):
                raw("HSET", key, "falseProbability", text)
                assert f.info().false_probability == p
        finally:
            f.delete()

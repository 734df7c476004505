"""Search, file listing and the remote verdict, through the real huggingface_hub client talking to
the fake Hub; and each way a request can fail, answered in one line."""

from __future__ import annotations

import pytest

from app.hub import HubClient, HubError, check_remote, group_gguf_files
from app.hub.files import HubPart, quantization_of
from app.hub.token import save_token, stored_token
from app.hub.verdict import HEADER_FIRST_BYTES
from tests.hub.fake_hub import GOOD_TOKEN, FakeFile, FakeRepo


def test_search_finds_gguf_repos_most_downloaded_first(hub, tiny_repo, smol_repo):
    hits = HubClient().search("")
    assert [h.repo_id for h in hits] == [smol_repo.repo_id, tiny_repo.repo_id]
    assert (hits[0].downloads, hits[0].likes, hits[0].gated) == (5000, 5, False)
    assert [h.repo_id for h in HubClient().search("smollm2")] == [smol_repo.repo_id]
    paths = [r[1] for r in hub.requests if r[1].startswith("/api/models?")]
    assert len(paths) == 2 and all("filter=gguf" in p and "sort=downloads" in p for p in paths)


def test_repo_files_lists_gguf_files_with_size_sha_and_quantization(hub, smol_repo, smollm2_path):
    from tests.models import SMOLLM2_SHA256

    repo = HubClient().repo_files(smol_repo.repo_id)
    assert repo.revision == smol_repo.sha and repo.licence == "apache-2.0" and not repo.gated
    (f,) = repo.files  # README.md and config.json are left out
    assert (f.name, f.quantization, f.size) == ("SmolLM2-135M-Instruct.Q4_1.gguf", "Q4_1", smollm2_path.stat().st_size)
    assert f.parts[0].sha256 == SMOLLM2_SHA256


def test_split_files_are_one_model_and_incomplete_splits_are_not_offered():
    parts = [HubPart(f"Q8_0/big-Q8_0-0000{i}-of-00003.gguf", 10, "a" * 64) for i in (2, 1, 3)]
    parts += [
        HubPart("half-Q4_K_M-00001-of-00002.gguf", 5, None),
        HubPart("mmproj-f16.gguf", 1, None),
        HubPart("small-IQ4_XS.gguf", 3, None),
    ]
    files, incomplete = group_gguf_files(parts)
    assert [(f.name, f.quantization, f.size, f.split) for f in files] == [
        ("big-Q8_0.gguf", "Q8_0", 30, True),
        ("small-IQ4_XS.gguf", "IQ4_XS", 3, False),
    ]
    assert [p.path for p in files[0].parts] == [f"Q8_0/big-Q8_0-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert incomplete == ["half-Q4_K_M.gguf (1 of 2 parts)"]


@pytest.mark.parametrize(
    "name, quant",
    [
        ("Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("qwen2.5-0.5b-instruct-q8_0.gguf", "Q8_0"),
        ("model.BF16.gguf", "BF16"),
        ("model-IQ3_XXS.gguf", "IQ3_XXS"),
        ("model.gguf", "?"),
    ],
)
def test_quantization_from_the_file_name(name, quant):
    assert quantization_of(name) == quant


def test_the_verdict_comes_from_the_header_alone(hub, smol_repo, smollm2_path):
    client = HubClient()
    repo = client.repo_files(smol_repo.repo_id)
    v = check_remote(client, repo.repo_id, repo.revision, repo.files[0], available_bytes=8 << 30, total_bytes=16 << 30)
    assert (v.verdict, v.supported, v.memory, v.template) == ("ok", True, "ok", "ok")
    assert v.n_ctx == 8192  # SmolLM2's training length, which fits 8 GB
    # One range request of the first 2 MiB, never the whole 98 MB file.
    assert v.header_bytes == HEADER_FIRST_BYTES < smollm2_path.stat().st_size
    ranges = [h.get("Range") for m, p, h in hub.requests if m == "GET" and "/resolve/" in p]
    assert ranges == [f"bytes=0-{HEADER_FIRST_BYTES - 1}"]
    # Oracle: the same preflight on the whole local file.
    from app.library.preflight import preflight

    local = preflight(smollm2_path, 8192, available_bytes=8 << 30, total_bytes=16 << 30)
    assert v.messages == local.messages


def test_a_header_longer_than_the_first_range_is_fetched_in_more_ranges(hub, smol_repo, monkeypatch):
    import app.hub.verdict as verdict

    monkeypatch.setattr(verdict, "HEADER_FIRST_BYTES", 256 << 10)  # SmolLM2's header is 1.7 MB
    client = HubClient()
    repo = client.repo_files(smol_repo.repo_id)
    v = check_remote(client, repo.repo_id, repo.revision, repo.files[0], available_bytes=8 << 30, total_bytes=16 << 30)
    assert v.supported and v.header_bytes == 2 << 20
    ranges = [h.get("Range") for m, p, h in hub.requests if m == "GET" and "/resolve/" in p]
    assert ranges == ["bytes=0-262143", "bytes=262144-524287", "bytes=524288-1048575", "bytes=1048576-2097151"]


def test_a_file_that_is_not_gguf_gets_one_line(hub, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + bytes(1000))
    hub.add(FakeRepo("test/bad-GGUF", [FakeFile("bad.gguf", bad)]))
    client = HubClient()
    repo = client.repo_files("test/bad-GGUF")
    from app.errors import ModelFormatError

    with pytest.raises(ModelFormatError, match=r"^test/bad-GGUF/bad.gguf: not a GGUF file"):
        check_remote(client, repo.repo_id, repo.revision, repo.files[0])


# -- failures: each one line ----------------------------------------------------------------------


def one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text and len(text) < 400, text
    return text


def test_no_network(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    for call in (lambda c: c.search("llama"), lambda c: c.repo_files("a/b")):
        with pytest.raises(HubError) as e:
            call(HubClient())
        assert e.value.kind == "offline" and "cannot reach 127.0.0.1:9" in one_line(e.value)


def test_dns_failure(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://no-such-host.invalid")
    with pytest.raises(HubError) as e:
        HubClient().search("llama")
    assert e.value.kind == "dns" and "cannot look up no-such-host.invalid" in one_line(e.value)


def test_unknown_repository_is_a_404(hub):
    with pytest.raises(HubError) as e:
        HubClient().repo_files("nobody/nothing")
    assert e.value.kind == "not_found" and one_line(e.value).startswith("nobody/nothing: no such repository")


def test_unknown_file_is_a_404(hub, tiny_repo):
    with pytest.raises(HubError) as e:
        HubClient().file_location(tiny_repo.repo_id, "gone.gguf", tiny_repo.sha)
    assert e.value.kind == "not_found" and "no such file" in one_line(e.value)


def test_gated_repository_asks_for_the_licence_and_a_token(hub, tiny_gguf):
    hub.add(FakeRepo("test/gated-GGUF", [FakeFile("g-Q8_0.gguf", tiny_gguf)], gated=True))
    client = HubClient()
    repo = client.repo_files("test/gated-GGUF")  # the listing is public, as on the Hub
    assert repo.gated
    with pytest.raises(HubError) as e:
        check_remote(client, repo.repo_id, repo.revision, repo.files[0])
    msg = one_line(e.value)
    assert e.value.kind == "gated" and f"{hub.url}/test/gated-GGUF" in msg and "token" in msg
    # The token, once pasted, is kept in the keyring and sent.
    save_token(GOOD_TOKEN)
    assert stored_token() == GOOD_TOKEN
    v = check_remote(HubClient(), repo.repo_id, repo.revision, repo.files[0])
    assert v.supported
    assert {k.lower(): v for k, v in hub.requests[-1][2].items()}["authorization"] == f"Bearer {GOOD_TOKEN}"


def test_a_refused_token_says_so(hub, tiny_gguf):
    hub.add(FakeRepo("test/gated-GGUF", [FakeFile("g-Q8_0.gguf", tiny_gguf)], gated=True))
    with pytest.raises(HubError) as e:
        HubClient(token="hf_wrong").file_location("test/gated-GGUF", "g-Q8_0.gguf", "main")
    assert e.value.kind == "gated"


def test_without_a_keyring_the_token_is_not_stored(monkeypatch):
    import keyring
    from keyring.backends import fail

    from app.hub.token import TokenStoreError

    monkeypatch.setattr(keyring, "get_keyring", lambda: fail.Keyring())
    with pytest.raises(TokenStoreError, match="no keyring is available"):
        save_token("hf_abc")
    assert stored_token() is None
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    assert stored_token() == "hf_from_env"


def test_the_reader_judges_a_header_prefix_against_the_whole_size(tmp_path, tiny_gguf):
    from app.errors import ModelFormatError
    from app.gguf import open_gguf

    with open_gguf(tiny_gguf) as whole:
        cut, size, names = whole.data_offset, whole.file_size, list(whole.tensors)
    prefix = tmp_path / "prefix.gguf"
    prefix.write_bytes(tiny_gguf.read_bytes()[:cut])
    with open_gguf(prefix, full_size=size) as f:
        assert list(f.tensors) == names
        with pytest.raises(ModelFormatError, match="holds only the header"):
            f.tensor_bytes(names[0])
    with pytest.raises(ModelFormatError, match="needs bytes"):  # the data region is checked
        open_gguf(prefix, full_size=size - 1).close()
    with pytest.raises(ModelFormatError, match="more than the"):
        open_gguf(prefix, full_size=cut - 1).close()
    prefix.write_bytes(tiny_gguf.read_bytes()[: cut // 2])  # a header cut short: refused
    with pytest.raises(ModelFormatError):
        open_gguf(prefix, full_size=size).close()

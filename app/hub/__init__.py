"""Getting models from the Hugging Face Hub: search, a repository's GGUF files with our verdict on
each, and downloads that are resumable, verified by SHA-256 and imported into the library.

Everything goes through the `huggingface_hub` library (`HfApi` for search and file lists, its
`get_hf_file_metadata` and `http_get` for transfers); `HF_ENDPOINT` is read at each call, so a
test server can stand in for the Hub. No Qt here: the window wraps `DownloadQueue` in app/ui.
Nothing here touches the network unless asked to.
"""

from app.hub.client import HubClient, HubError, RepoHit, hub_endpoint
from app.hub.curated import CURATED, CuratedModel
from app.hub.download import DownloadJob, DownloadQueue, download_now, pending_jobs
from app.hub.files import HubFile, HubPart, RepoFiles, group_gguf_files
from app.hub.verdict import RemoteVerdict, check_remote

__all__ = [
    "HubClient",
    "HubError",
    "RepoHit",
    "hub_endpoint",
    "CURATED",
    "CuratedModel",
    "DownloadJob",
    "DownloadQueue",
    "download_now",
    "pending_jobs",
    "HubFile",
    "HubPart",
    "RepoFiles",
    "group_gguf_files",
    "RemoteVerdict",
    "check_remote",
]

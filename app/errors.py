"""The error hierarchy: one root, each subclass also a matching builtin.

Every error that reaches a user is one line that says what is wrong and where. The command
line maps these classes to exit codes (see `EXIT_CODES`).
"""

MAX_MESSAGE = 600


def one_line(message: str) -> str:
    """`message` with control characters escaped and its length bounded: safe to show a user.

    Messages quote bytes from untrusted files (keys, tensor names); this keeps each on one line.
    """
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    return out if len(out) <= MAX_MESSAGE else out[: MAX_MESSAGE - 1] + "…"


class LlambdaError(Exception):
    """Root of every error Llambda raises on purpose. Its message is always one printable line."""

    def __init__(self, *args: object) -> None:
        if len(args) == 1 and isinstance(args[0], str):
            args = (one_line(args[0]),)
        super().__init__(*args)


class ModelFormatError(LlambdaError, ValueError):
    """A model file is malformed, truncated or not GGUF at all."""


class UnsupportedModelError(LlambdaError, ValueError):
    """A well-formed model that this engine cannot run (architecture, tensor type...)."""


class OutOfMemoryError(LlambdaError, MemoryError):
    """Running the model would need more memory than the machine can give."""


class ModelFileChangedError(LlambdaError, OSError):
    """The mapped model file was truncated or rewritten in place since it was loaded: its
    weights can no longer be read safely (a page past a new end would kill the process)."""


class KernelError(LlambdaError, RuntimeError):
    """The kernel library returned a failure status."""


class TemplateError(LlambdaError, ValueError):
    """A chat template failed to compile or to render safely."""


class TokenizerError(LlambdaError, ValueError):
    """A vocabulary in the model file cannot be turned into a tokenizer."""


class LibraryError(LlambdaError, OSError):
    """The model library could not import, find or remove a model."""


class StoreError(LlambdaError, OSError):
    """The conversation store could not be read or written."""


# Exit codes of the command line (README, "The command line"): 0 ok, 2 usage, 3 bad file, 4 unsupported, 5 OOM.
EXIT_OK, EXIT_USAGE, EXIT_BAD_FILE, EXIT_UNSUPPORTED, EXIT_OOM = 0, 2, 3, 4, 5


def exit_code_for(exc: BaseException) -> int:
    """The process exit code for an error that ends a command."""
    if isinstance(exc, ModelFormatError):
        return EXIT_BAD_FILE
    if isinstance(exc, UnsupportedModelError):
        return EXIT_UNSUPPORTED
    if isinstance(exc, OutOfMemoryError):
        return EXIT_OOM
    return 1

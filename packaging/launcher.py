"""Entry script of the frozen bundle (build.spec): the same as the `llambda` command.

`Llambda --self-test` runs `app.selftest.run()` here as well, so a bundle can prove itself even
where the command line does not know the flag yet.
"""

import sys


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        from app.selftest import run

        return run()
    from app.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())

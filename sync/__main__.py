"""`python -m sync`: the same CLI as the `sync` console script."""

from sync.cli import main

if __name__ == "__main__":
    main()

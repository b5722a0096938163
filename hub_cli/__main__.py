"""`python -m hub_cli ...` runs the `hub` command."""

from hub_cli.main import main

if __name__ == "__main__":
    main()

from orthobench.cli import main

main()

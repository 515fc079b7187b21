from orthobench._console import main

main()

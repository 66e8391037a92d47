from perfkit.cli import main

main(prog_name="perfkit")

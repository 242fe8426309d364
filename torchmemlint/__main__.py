from torchmemlint.cli import main

main(prog_name="torchmemlint")

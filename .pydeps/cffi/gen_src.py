"""Entry point so ``python -m cffi.gen_src`` works."""

if __name__ == '__main__':
    from cffi._cffi_gen_src import run
    run()

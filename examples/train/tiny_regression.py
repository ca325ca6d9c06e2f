"""The tiny training job of the examples: it lives in the package, as
``jupyter_gtc.examples.tiny_regression``, so that a job or a notebook finds it wherever it runs
(``python -m jupyter_gtc.examples.tiny_regression --steps 200``). This file runs the same
program from a checkout of the repository."""

from jupyter_gtc.examples.tiny_regression import main

if __name__ == "__main__":
    main()

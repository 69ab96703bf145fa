"""The book's own build tooling, not part of the installed ``normlab`` package.

``_config.yml`` loads :mod:`normlab_book.reader` as a local Sphinx extension (its folder,
``book/_ext``, goes on ``sys.path``), and ``make book`` runs ``python -m
normlab_book.reader`` with the same folder on ``PYTHONPATH``. The tooling imports
``normlab``; ``normlab`` never imports the tooling, so the wheel holds no Sphinx extension.
"""

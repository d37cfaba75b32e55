# The public API of researchcrew: the one list of what `import researchcrew` offers. Type checkers read this stub;
# at run time `researchcrew/__init__.py` reads it too (lazy_loader.attach_stub) and loads each name on first use.

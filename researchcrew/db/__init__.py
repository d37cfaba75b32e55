"""researchcrew's database: one SQLite file by default, PostgreSQL at scale, shared by every domain.

* ``engine`` — ``create_engine(url)`` configured per backend, ``upgrade`` to the newest migration, ``Reader``;
* ``base`` — the declarative ``Base`` and the column types every table shares;
* ``models`` / ``job_tables`` — the tables (importing ``models`` gives the whole schema);
* ``migrations`` — the Alembic history of that schema;
* ``session`` — ``Sessions``: the read and write sessions (units of work) a repository opens;
* ``failures`` — ``store_failure``: a database failure as an outage (retry later) or a failed operation.

Each domain's repository lives beside its domain and stands on this package: ``memory/store.py`` (conversation
memory), ``jobs/_store.py``, ``service/accounts.py`` and ``service/chat_sessions.py``, ``deep/store.py``.
Nothing here imports from a domain (``tests/unit/test_layers.py``).
"""

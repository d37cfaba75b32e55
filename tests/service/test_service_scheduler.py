"""The embedded scheduler in the service: the app's lifespan starts it, a due slot of a job created over HTTP fires
and runs in the service process, and shutdown stops it; off by setting, and by default when Redis is configured.
Two apps on one database (``serve --workers 2``) run a slot once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from researchcrew.db.job_tables import JobRow
from researchcrew.service._batch import embedded_scheduler_enabled
from researchcrew.settings import JobsSettings, RedisSettings, Settings
from tests.service.jobs_support import QUESTIONS, finished_run, jobs_service, jobs_settings, poll
from tests.service.support import ServiceHarness

YEARLY = "0 0 1 1 *"  # no new slot comes during a test; backdated, its latest missed slot is due at once


def scheduler_tasks() -> list[asyncio.Task[object]]:
    return [task for task in asyncio.all_tasks() if task.get_name() == "researchcrew-scheduler"]


async def backdate(app: ServiceHarness, name: str, days: float) -> None:
    engine = (await app.runtime.memory_store()).engine
    async with engine.begin() as connection:
        created = datetime.now(UTC) - timedelta(days=days)
        await connection.execute(update(JobRow).where(JobRow.name == name).values(created_at=created))


async def test_a_due_schedule_fires_in_the_running_app_and_shutdown_stops_the_scheduler(tmp_path: Path) -> None:
    async with jobs_service(jobs_settings(tmp_path, schedule_refresh_s=1)) as app, app.client() as client:
        assert len(scheduler_tasks()) == 1
        ada = app.auth("ada")
        body = {"name": "yearly", "questions": QUESTIONS, "schedule": YEARLY}
        assert (await client.post("/v1/jobs", headers=ada, json=body)).status_code == 201
        await backdate(app, "yearly", 3 * 366)  # three slots missed: the latest one runs, once
        runs = await poll(client, "/v1/jobs/yearly/runs", ada, lambda body: bool(body["runs"]), timeout_s=20)
        [run] = runs["runs"]
        assert (run["trigger"], run["executor"]) == ("catch_up", "in_process")
        run = await finished_run(client, run["id"], ada)
        assert (run["status"], run["counts"]["answered"]) == ("completed", 2)
        await asyncio.sleep(1.5)  # another refresh and tick: nothing more fires
        assert len((await client.get("/v1/jobs/yearly/runs", headers=ada)).json()["runs"]) == 1
    assert scheduler_tasks() == []  # stopped with the app, before its runtime closed


async def test_two_service_processes_on_one_database_run_a_slot_once(tmp_path: Path) -> None:
    settings = jobs_settings(tmp_path, schedule_refresh_s=1)
    async with jobs_service(settings) as first, first.client() as client:
        ada = first.auth("ada")
        body = {"name": "yearly", "questions": QUESTIONS[:1], "schedule": YEARLY}
        assert (await client.post("/v1/jobs", headers=ada, json=body)).status_code == 201
        await backdate(first, "yearly", 3 * 366)
        second = settings.model_copy(update={"service": settings.service.model_copy(update={"auth": False})})
        async with jobs_service(second):  # another process's app on the same database (its users exist already)
            assert len(scheduler_tasks()) == 2
            runs = await poll(client, "/v1/jobs/yearly/runs", ada, lambda body: bool(body["runs"]), timeout_s=20)
            await finished_run(client, runs["runs"][0]["id"], ada)
            await asyncio.sleep(2.5)  # both loops tick again
            assert len((await client.get("/v1/jobs/yearly/runs", headers=ada)).json()["runs"]) == 1


async def test_the_scheduler_can_be_turned_off(tmp_path: Path) -> None:
    async with jobs_service(jobs_settings(tmp_path, embedded_scheduler=False)) as app, app.client() as client:
        assert scheduler_tasks() == []
        response = await client.post(
            "/v1/jobs", headers=app.auth("ada"), json={"name": "by-hand", "questions": QUESTIONS[:1]}
        )
        run = (await client.post("/v1/jobs/by-hand/runs", headers=app.auth("ada"))).json()
        assert response.status_code == 201 and run["executor"] == "in_process"  # runs by hand still work
        assert (await finished_run(client, run["id"], app.auth("ada")))["status"] == "completed"


@pytest.mark.parametrize(
    ("chosen", "redis_url", "enabled"),
    [
        (None, None, True),
        (None, "redis://127.0.0.1:6379/0", False),  # with Redis, `researchcrew scheduler` fires the schedules
        (True, "redis://127.0.0.1:6379/0", True),
        (False, None, False),
    ],
)
def test_the_default_follows_the_deployment(chosen: bool | None, redis_url: str | None, enabled: bool) -> None:
    settings = Settings(jobs=JobsSettings(embedded_scheduler=chosen), redis=RedisSettings(url=redis_url))
    assert embedded_scheduler_enabled(settings) is enabled

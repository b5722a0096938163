"""Cron jobs, their runs and agents' timers: thin views over services.scheduling's cron and notifications."""

from typing import Any, TypeVar

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from plugins_app.api.base import AccountView, Pagination
from plugins_app.api.edge import body
from plugins_app.api.execution.serializers import execute_response
from plugins_app.api.scheduling import serializers as s
from plugins_app.api.schema import page_of as _page_of
from plugins_app.services.scheduling import cron, notifications

S = TypeVar("S", bound=BaseSerializer)


def _validated(serializer_class: type[S], data: Any, *, partial: bool = False) -> S:
    serializer = serializer_class(data=data, partial=partial)
    serializer.is_valid(raise_exception=True)
    return serializer


def _paginated(view: AccountView, qs: QuerySet[Any], serializer_class: type[BaseSerializer]) -> Response:
    paginator = Pagination()
    page = paginator.paginate_queryset(qs, view.request, view=view)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)


class CronJobListView(AccountView):
    @extend_schema(responses=_page_of(s.CronJobSerializer, "CronJobPage"), operation_id="cron_jobs_list",
                   summary="The account's cron jobs")
    def get(self, request: Request) -> Response:
        return _paginated(self, self.account.cron_jobs.order_by("name", "id"), s.CronJobSerializer)

    @body(s.CronJobWriteSerializer, responses={201: s.CronJobSerializer})
    def post(self, request: Request) -> Response:
        body = _validated(s.CronJobWriteSerializer, request.data)
        job = cron.create_job(self.account, **body.service_fields())
        return Response(s.CronJobSerializer(job).data, status=status.HTTP_201_CREATED)


@extend_schema(responses=s.CronJobSerializer)
class CronJobDetailView(AccountView):
    def get(self, request: Request, job_id: str) -> Response:
        return Response(s.CronJobSerializer(cron.get_job(self.account, job_id)).data)

    @body(s.CronJobWriteSerializer, partial=True, summary="Change some fields; a schedule replaces the old one")
    def patch(self, request: Request, job_id: str) -> Response:
        body = _validated(s.CronJobWriteSerializer, request.data, partial=True)
        job = cron.update_job(self.account, job_id, **body.service_fields())
        return Response(s.CronJobSerializer(job).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, job_id: str) -> Response:
        cron.delete_job(self.account, job_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class CronJobRunNowView(AccountView):
    @extend_schema(request=None, responses={201: s.CronRunSerializer},
                   summary="Fire one slot now: skipped, cancelled, or dispatching")
    def post(self, request: Request, job_id: str) -> Response:
        run = cron.run_now(self.account, job_id)
        return Response(s.CronRunSerializer(run).data, status=status.HTTP_201_CREATED)


class CronJobRunListView(AccountView):
    @extend_schema(responses=_page_of(s.CronRunSerializer, "CronRunPage"), operation_id="cron_job_runs_list",
                   summary="A job's run history, newest first",
                   parameters=[OpenApiParameter("status", str, description="only runs with this status")])
    def get(self, request: Request, job_id: str) -> Response:
        return _paginated(self, cron.runs(self.account, job_id, request.query_params.get("status")),
                          s.CronRunSerializer)


class CronRunDetailView(AccountView):
    @extend_schema(responses=s.CronRunSerializer)
    def get(self, request: Request, run_id: str) -> Response:
        return Response(s.CronRunSerializer(cron.get_run(self.account, run_id)).data)


class CronRunCompleteView(AccountView):
    @body(s.CompleteRequestSerializer, responses=s.CronRunSerializer,
          summary="The platform closes a run; a second call answers 409")
    def post(self, request: Request, run_id: str) -> Response:
        body = _validated(s.CompleteRequestSerializer, request.data).validated_data
        run = cron.complete_run(self.account, run_id, body["status"], body.get("sessionId"))
        return Response(s.CronRunSerializer(run).data)


class NotificationListView(AccountView):
    @extend_schema(responses=_page_of(s.NotificationSerializer, "NotificationPage"), operation_id="notifications_list",
                   summary="The account's timers, newest first",
                   parameters=[OpenApiParameter("sessionId", str), OpenApiParameter("status", str)])
    def get(self, request: Request) -> Response:
        return _paginated(self, notifications.listing(self.account, request.query_params), s.NotificationSerializer)

    @body(s.NotificationRequestSerializer,
          responses={201: s.NotificationOutcomeSerializer, 200: s.NotificationOutcomeSerializer},
          summary="Set a timer: notifyScheduled may reword, clamp or cancel it")
    def post(self, request: Request) -> Response:
        body = _validated(s.NotificationRequestSerializer, request.data).validated_data
        note, result, effects = notifications.schedule(
            self.account, session_id=body["sessionId"], message=body["message"], delay_seconds=body["delaySeconds"])
        chain = execute_response(result, effects)
        cancelled = result.cancellation is not None
        return Response({
            "outcome": "cancelled" if cancelled else "scheduled",
            "notification": s.NotificationSerializer(note).data,
            "cancellation": chain["cancellation"], "trace": chain["trace"], "effects": chain["effects"],
        }, status=status.HTTP_200_OK if cancelled else status.HTTP_201_CREATED)


class NotificationDetailView(AccountView):
    @extend_schema(responses=s.NotificationSerializer)
    def get(self, request: Request, notification_id: str) -> Response:
        return Response(s.NotificationSerializer(notifications.get(self.account, notification_id)).data)

"""API views of versions (drafts, checks, deploy, rollback), the account change log, recorded calls and replays."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers as drf_serializers
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from plugins_app.api.base import AccountView, AuditListView, validated
from plugins_app.api.dry_run import rehearsable
from plugins_app.api.edge import body
from plugins_app.api.plugins import serializers as s
from plugins_app.api.versions import serializers as vs
from plugins_app.services.audit import changes
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.versions import check as checks
from plugins_app.services.versions import recording, replay, shadow
from plugins_app.services.versions import releases as versions

_VERSIONS = inline_serializer("VersionList", {"live": drf_serializers.IntegerField(allow_null=True),
                                              "versions": vs.VersionSerializer(many=True)})
_DEPLOYED = inline_serializer("Deployed", {"plugin": s.InstallationSerializer(), "version": vs.VersionSerializer()})


def _deployed(installation, version) -> dict:
    version.installation = installation
    return {"plugin": s.InstallationSerializer(installation).data, "version": vs.VersionSerializer(version).data}


class VersionListView(AccountView):
    max_body_bytes = plugins.MAX_INSTALL_BODY_BYTES   # a draft carries a whole plugin's source, as an install does
    @extend_schema(responses=_VERSIONS, summary="An installation's versions, newest first")
    def get(self, request: Request, installation_id: str) -> Response:
        installation, rows = versions.list_versions(self.account, installation_id)
        for row in rows:
            row.installation = installation
        return Response({"live": installation.live_version, "versions": vs.VersionSerializer(rows, many=True).data})

    @rehearsable
    @body(vs.DraftRequestSerializer, responses={201: vs.VersionSerializer},
          summary="Save a draft version; what runs does not change")
    def post(self, request: Request, installation_id: str) -> Response:
        data = validated(vs.DraftRequestSerializer, request.data)
        version = versions.create_draft(self.account, installation_id, source=data["source"],
                                        language=data.get("language"), note=data["note"],
                                        typecheck=data["typecheck"])
        return Response(vs.VersionSerializer(version).data, status=status.HTTP_201_CREATED)


class VersionDeployView(AccountView):
    @rehearsable
    @body(vs.DeployRequestSerializer, responses=_DEPLOYED,
          summary="Make a version the live code from the very next call (optionally checked against recorded "
                  "calls first, and refused past maxDifferent)")
    def post(self, request: Request, installation_id: str, number: str) -> Response:
        data = validated(vs.DeployRequestSerializer, request.data or {})
        installation, version, report = checks.deploy_checked(
            self.account, installation_id, number, grant=data.get("grant"), calls=data.get("check"),
            max_different=data.get("maxDifferent"))
        answer = _deployed(installation, version)
        if report is not None:
            answer["check"] = report
        return Response(answer)


class CheckView(AccountView):
    @body(vs.CheckRequestSerializer, responses=OpenApiTypes.OBJECT,
          summary="Run a version at its place on the newest recorded calls, beside the live code, writing "
                  "nothing: counts and examples of same, different, would cancel, would no longer cancel, failed")
    def post(self, request: Request, installation_id: str) -> Response:
        data = validated(vs.CheckRequestSerializer, request.data or {})
        return Response(checks.check(self.account, installation_id, data["version"], data.get("calls")).as_dict())


@extend_schema(summary="Recorded execute calls (redacted; the newest per hook within the bounds), newest first",
               parameters=[OpenApiParameter("hook", str, description="only this hook"),
                           OpenApiParameter("outcome", str, description="unchanged, changed or cancelled"),
                           OpenApiParameter("since", str, description="ISO date or date-time"),
                           OpenApiParameter("until", str, description="ISO date or date-time")])
class RecordedCallListView(AuditListView):
    serializer_class = vs.RecordedCallSerializer
    query = staticmethod(recording.recorded_calls)


class RecordedCallReplayView(AccountView):
    @body(vs.RecordedReplayRequestSerializer, responses=OpenApiTypes.OBJECT,
          summary="Run a recorded call's context against the current chain (or a draft), without side effects")
    def post(self, request: Request, call_id: str) -> Response:
        data = validated(vs.RecordedReplayRequestSerializer, request.data or {})
        return Response(replay.replay_call(self.account, call_id, installation_id=data.get("installationId"),
                                           version=data.get("version")))


class RollbackView(AccountView):
    @rehearsable
    @body(vs.DeployRequestSerializer, responses=_DEPLOYED,
          summary="Redeploy the newest earlier version that was live before")
    def post(self, request: Request, installation_id: str) -> Response:
        data = validated(vs.DeployRequestSerializer, request.data or {})
        return Response(_deployed(*versions.rollback(self.account, installation_id, grant=data.get("grant"))))


@extend_schema(summary="The account change log, filtered, newest first", parameters=[
    OpenApiParameter("action", str, description="only this action"),
    OpenApiParameter("plugin", str, description="only this plugin slug"),
    OpenApiParameter("installationId", str), OpenApiParameter("actor", str, description="who, as shown"),
    OpenApiParameter("since", str, description="ISO date or date-time"),
    OpenApiParameter("until", str, description="ISO date or date-time")])
class ChangeListView(AuditListView):
    """The account change log: installs, deploys, rollbacks, grants, settings, reorders, releases."""

    serializer_class = vs.ChangeSerializer
    query = staticmethod(changes.query)


class ReplayView(AccountView):
    @body(vs.ReplayRequestSerializer, responses=OpenApiTypes.OBJECT,
          summary="Run a cancel-log entry's context against the current chain (or a draft), without side effects")
    def post(self, request: Request, entry_id: str) -> Response:
        data = validated(vs.ReplayRequestSerializer, request.data or {})
        outcome = replay.replay_cancellation(self.account, entry_id, installation_id=data.get("installationId"),
                                             version=data.get("version"), live_reads=data["liveReads"])
        return Response(replay.as_dict(outcome))


class ShadowView(AccountView):
    @extend_schema(responses=OpenApiTypes.OBJECT,
                   summary="What a shadowed installation or draft would have done: counts and recent examples")
    def get(self, request: Request, installation_id: str) -> Response:
        return Response(shadow.report(self.account, installation_id))


class PromoteView(AccountView):
    @extend_schema(request=None, responses=s.InstallationSerializer,
                   summary="Shadow to live: the installation rejoins its chains, or its shadowed draft is deployed")
    def post(self, request: Request, installation_id: str) -> Response:
        return Response(s.InstallationSerializer(shadow.promote(self.account, installation_id)).data)

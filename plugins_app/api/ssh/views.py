"""The SSH API: the account's servers (/ssh-hosts) and the gateway that runs agents' operations."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from plugins_app.api.base import AccountView, validated
from plugins_app.api.edge import body
from plugins_app.api.ssh import serializers as ss
from plugins_app.services.ssh import gateway as ssh_gateway
from plugins_app.services.ssh import hosts as ssh_hosts

_HOST_LIST = inline_serializer("SshHostList", {"sshHosts": ss.SshHostSerializer(many=True)})


class SshHostListView(AccountView):
    @extend_schema(responses=_HOST_LIST, operation_id="ssh_hosts_list")
    def get(self, request: Request) -> Response:
        return Response({"sshHosts": ss.SshHostSerializer(ssh_hosts.list_hosts(self.account), many=True).data})

    @body(ss.SshHostWriteSerializer, responses={201: ss.SshHostSerializer})
    def post(self, request: Request) -> Response:
        host = ssh_hosts.create_host(self.account, validated(ss.SshHostWriteSerializer, request.data))
        return Response(ss.SshHostSerializer(host).data, status=status.HTTP_201_CREATED)


@extend_schema(responses=ss.SshHostSerializer)
class SshHostDetailView(AccountView):
    def get(self, request: Request, host_id: str) -> Response:
        return Response(ss.SshHostSerializer(ssh_hosts.get_host(self.account, host_id)).data)

    @body(ss.SshHostWriteSerializer, partial=True)
    def patch(self, request: Request, host_id: str) -> Response:
        host = ssh_hosts.update_host(self.account, host_id, validated(ss.SshHostWriteSerializer, request.data))
        return Response(ss.SshHostSerializer(host).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, host_id: str) -> Response:
        ssh_hosts.delete_host(self.account, host_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SshExecuteView(AccountView):
    """Runs an agent's SSH operation: sshConnectionOpening (once per server per turn),
    sshCommandSending, the operation, sshCommandCompleted."""

    @body(ss.SshExecuteRequestSerializer, responses=ss.SshExecuteResponseSerializer)
    def post(self, request: Request) -> Response:
        body = validated(ss.SshExecuteRequestSerializer, request.data)
        operation = ssh_gateway.Operation(
            session_id=body["sessionId"], agent_id=body["agentId"], turn_id=body["turnId"], kind=body["kind"],
            command=body["command"], path=body["path"], content=body["content"], intent=body["intent"])
        return Response(ss.gateway_response(ssh_gateway.execute(self.account, body["sshHostId"], operation)))

"""ConfigurationControlManager: topic configs — IncrementalAlterConfigs and AlterConfigs as Config records,
validation of the configs a new topic is created with, and the per-topic settings the other
managers ask for (unclean leader election). Controller thread only.
"""

from __future__ import annotations

from typing import Any

from client.errors import BrokerResponseError, InvalidConfigError
from client.protocol.body import Body
from controller.quorum.state import ControlManager
from controller.quorum.topic_configs import validate_topic_config
from controller.quorum.validation import config_change_records, replacing_resource
from controller.results import AlterConfigsResult


class ConfigurationControlManager(ControlManager):
    def unclean_for(self, topic: str) -> bool:
        """unclean.leader.election.enable for `topic`: its config, else the controller's."""
        v = self.image.topic_config(topic).get("unclean.leader.election.enable")
        return self.settings.unclean_leader_election_enable if v is None else v == "true"

    @staticmethod
    def check_new_topic_configs(configs: dict[str, Any]) -> None:
        """Raise InvalidConfigError naming the first bad key of a new topic's configs."""
        for k, v in configs.items():
            err = validate_topic_config(k, v)
            if err:
                raise InvalidConfigError(f"{k}: {err}")

    def incremental_alter_configs(
        self, resources: list[Body], validate_only: bool = False
    ) -> list[AlterConfigsResult]:
        """IncrementalAlterConfigs: resources [{resource_type (2 topic, 4 broker), resource_name,
        configs: [{name, config_operation (0 set, 1 delete), value}]}] →
        [{resource_type, resource_name, error_code, error_message}]."""
        self._check_active()
        results: list[AlterConfigsResult] = []
        records: list[Any] = []
        for res in resources:
            rtype: Any = res.get("resource_type")
            rname: Any = res.get("resource_name")
            out: AlterConfigsResult = {
                "resource_type": rtype,
                "resource_name": rname,
                "error_code": 0,
                "error_message": None,
            }
            try:
                records += config_change_records(self.image, res)
            except BrokerResponseError as e:
                out["error_code"], out["error_message"] = int(e.code), e.message
            results.append(out)
        if records and not validate_only:
            self._write(records)
        return results

    def alter_configs(
        self, resources: list[Body], validate_only: bool = False
    ) -> list[AlterConfigsResult]:
        """AlterConfigs (Kafka's legacy 33): resources [{resource_type, resource_name, configs:
        [{name, value}]}]; each resource's dynamic configs become exactly those given (the
        others are deleted), checked as IncrementalAlterConfigs checks them, in the same
        controller step as the image they are compared with."""
        return self.incremental_alter_configs(
            [replacing_resource(self.image, r) for r in resources], validate_only
        )

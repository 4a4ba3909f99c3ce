"""The kio request entities each Kafka API served here may decode to: one union per API over
the versions registered in broker/kafka/apis.py (tests/unit/kafka/test_request_types.py keeps
the two in step). A translation's `body` is typed with its API's union, so mypy checks each
field it reads against every version it serves (a field some versions lack is read with
`getattr` and a default)."""

from __future__ import annotations

from kio.schema.alter_client_quotas import v0 as alter_client_quotas_v0
from kio.schema.alter_client_quotas import v1 as alter_client_quotas_v1
from kio.schema.alter_configs import v0 as alter_configs_v0
from kio.schema.alter_configs import v1 as alter_configs_v1
from kio.schema.alter_configs import v2 as alter_configs_v2
from kio.schema.api_versions import v0 as api_versions_v0
from kio.schema.api_versions import v1 as api_versions_v1
from kio.schema.api_versions import v2 as api_versions_v2
from kio.schema.api_versions import v3 as api_versions_v3
from kio.schema.consumer_group_describe import v0 as consumer_group_describe_v0
from kio.schema.consumer_group_describe import v1 as consumer_group_describe_v1
from kio.schema.consumer_group_heartbeat import v0 as consumer_group_heartbeat_v0
from kio.schema.consumer_group_heartbeat import v1 as consumer_group_heartbeat_v1
from kio.schema.create_acls import v1 as create_acls_v1
from kio.schema.create_acls import v2 as create_acls_v2
from kio.schema.create_acls import v3 as create_acls_v3
from kio.schema.create_partitions import v0 as create_partitions_v0
from kio.schema.create_partitions import v1 as create_partitions_v1
from kio.schema.create_partitions import v2 as create_partitions_v2
from kio.schema.create_partitions import v3 as create_partitions_v3
from kio.schema.create_topics import v2 as create_topics_v2
from kio.schema.create_topics import v3 as create_topics_v3
from kio.schema.create_topics import v4 as create_topics_v4
from kio.schema.create_topics import v5 as create_topics_v5
from kio.schema.create_topics import v6 as create_topics_v6
from kio.schema.create_topics import v7 as create_topics_v7
from kio.schema.delete_acls import v1 as delete_acls_v1
from kio.schema.delete_acls import v2 as delete_acls_v2
from kio.schema.delete_acls import v3 as delete_acls_v3
from kio.schema.delete_groups import v0 as delete_groups_v0
from kio.schema.delete_groups import v1 as delete_groups_v1
from kio.schema.delete_groups import v2 as delete_groups_v2
from kio.schema.delete_records import v0 as delete_records_v0
from kio.schema.delete_records import v1 as delete_records_v1
from kio.schema.delete_records import v2 as delete_records_v2
from kio.schema.delete_topics import v1 as delete_topics_v1
from kio.schema.delete_topics import v2 as delete_topics_v2
from kio.schema.delete_topics import v3 as delete_topics_v3
from kio.schema.delete_topics import v4 as delete_topics_v4
from kio.schema.delete_topics import v5 as delete_topics_v5
from kio.schema.describe_acls import v1 as describe_acls_v1
from kio.schema.describe_acls import v2 as describe_acls_v2
from kio.schema.describe_acls import v3 as describe_acls_v3
from kio.schema.describe_client_quotas import v0 as describe_client_quotas_v0
from kio.schema.describe_client_quotas import v1 as describe_client_quotas_v1
from kio.schema.describe_cluster import v0 as describe_cluster_v0
from kio.schema.describe_cluster import v1 as describe_cluster_v1
from kio.schema.describe_configs import v1 as describe_configs_v1
from kio.schema.describe_configs import v2 as describe_configs_v2
from kio.schema.describe_configs import v3 as describe_configs_v3
from kio.schema.describe_configs import v4 as describe_configs_v4
from kio.schema.describe_groups import v0 as describe_groups_v0
from kio.schema.describe_groups import v1 as describe_groups_v1
from kio.schema.describe_groups import v2 as describe_groups_v2
from kio.schema.describe_groups import v3 as describe_groups_v3
from kio.schema.describe_groups import v4 as describe_groups_v4
from kio.schema.describe_groups import v5 as describe_groups_v5
from kio.schema.elect_leaders import v0 as elect_leaders_v0
from kio.schema.elect_leaders import v1 as elect_leaders_v1
from kio.schema.elect_leaders import v2 as elect_leaders_v2
from kio.schema.fetch import v4 as fetch_v4
from kio.schema.fetch import v5 as fetch_v5
from kio.schema.fetch import v6 as fetch_v6
from kio.schema.fetch import v7 as fetch_v7
from kio.schema.fetch import v8 as fetch_v8
from kio.schema.fetch import v9 as fetch_v9
from kio.schema.fetch import v10 as fetch_v10
from kio.schema.fetch import v11 as fetch_v11
from kio.schema.fetch import v12 as fetch_v12
from kio.schema.find_coordinator import v0 as find_coordinator_v0
from kio.schema.find_coordinator import v1 as find_coordinator_v1
from kio.schema.find_coordinator import v2 as find_coordinator_v2
from kio.schema.find_coordinator import v3 as find_coordinator_v3
from kio.schema.find_coordinator import v4 as find_coordinator_v4
from kio.schema.heartbeat import v0 as heartbeat_v0
from kio.schema.heartbeat import v1 as heartbeat_v1
from kio.schema.heartbeat import v2 as heartbeat_v2
from kio.schema.heartbeat import v3 as heartbeat_v3
from kio.schema.heartbeat import v4 as heartbeat_v4
from kio.schema.incremental_alter_configs import v0 as incremental_alter_configs_v0
from kio.schema.incremental_alter_configs import v1 as incremental_alter_configs_v1
from kio.schema.init_producer_id import v0 as init_producer_id_v0
from kio.schema.init_producer_id import v1 as init_producer_id_v1
from kio.schema.init_producer_id import v2 as init_producer_id_v2
from kio.schema.init_producer_id import v3 as init_producer_id_v3
from kio.schema.init_producer_id import v4 as init_producer_id_v4
from kio.schema.join_group import v0 as join_group_v0
from kio.schema.join_group import v1 as join_group_v1
from kio.schema.join_group import v2 as join_group_v2
from kio.schema.join_group import v3 as join_group_v3
from kio.schema.join_group import v4 as join_group_v4
from kio.schema.join_group import v5 as join_group_v5
from kio.schema.join_group import v6 as join_group_v6
from kio.schema.join_group import v7 as join_group_v7
from kio.schema.leave_group import v0 as leave_group_v0
from kio.schema.leave_group import v1 as leave_group_v1
from kio.schema.leave_group import v2 as leave_group_v2
from kio.schema.leave_group import v3 as leave_group_v3
from kio.schema.leave_group import v4 as leave_group_v4
from kio.schema.leave_group import v5 as leave_group_v5
from kio.schema.list_groups import v0 as list_groups_v0
from kio.schema.list_groups import v1 as list_groups_v1
from kio.schema.list_groups import v2 as list_groups_v2
from kio.schema.list_groups import v3 as list_groups_v3
from kio.schema.list_groups import v4 as list_groups_v4
from kio.schema.list_offsets import v1 as list_offsets_v1
from kio.schema.list_offsets import v2 as list_offsets_v2
from kio.schema.list_offsets import v3 as list_offsets_v3
from kio.schema.list_offsets import v4 as list_offsets_v4
from kio.schema.list_offsets import v5 as list_offsets_v5
from kio.schema.list_offsets import v6 as list_offsets_v6
from kio.schema.list_offsets import v7 as list_offsets_v7
from kio.schema.metadata import v0 as metadata_v0
from kio.schema.metadata import v1 as metadata_v1
from kio.schema.metadata import v2 as metadata_v2
from kio.schema.metadata import v3 as metadata_v3
from kio.schema.metadata import v4 as metadata_v4
from kio.schema.metadata import v5 as metadata_v5
from kio.schema.metadata import v6 as metadata_v6
from kio.schema.metadata import v7 as metadata_v7
from kio.schema.metadata import v8 as metadata_v8
from kio.schema.metadata import v9 as metadata_v9
from kio.schema.metadata import v10 as metadata_v10
from kio.schema.metadata import v11 as metadata_v11
from kio.schema.metadata import v12 as metadata_v12
from kio.schema.offset_commit import v2 as offset_commit_v2
from kio.schema.offset_commit import v3 as offset_commit_v3
from kio.schema.offset_commit import v4 as offset_commit_v4
from kio.schema.offset_commit import v5 as offset_commit_v5
from kio.schema.offset_commit import v6 as offset_commit_v6
from kio.schema.offset_commit import v7 as offset_commit_v7
from kio.schema.offset_commit import v8 as offset_commit_v8
from kio.schema.offset_fetch import v1 as offset_fetch_v1
from kio.schema.offset_fetch import v2 as offset_fetch_v2
from kio.schema.offset_fetch import v3 as offset_fetch_v3
from kio.schema.offset_fetch import v4 as offset_fetch_v4
from kio.schema.offset_fetch import v5 as offset_fetch_v5
from kio.schema.offset_fetch import v6 as offset_fetch_v6
from kio.schema.offset_fetch import v7 as offset_fetch_v7
from kio.schema.offset_for_leader_epoch import v2 as offset_for_leader_epoch_v2
from kio.schema.offset_for_leader_epoch import v3 as offset_for_leader_epoch_v3
from kio.schema.offset_for_leader_epoch import v4 as offset_for_leader_epoch_v4
from kio.schema.produce import v3 as produce_v3
from kio.schema.produce import v4 as produce_v4
from kio.schema.produce import v5 as produce_v5
from kio.schema.produce import v6 as produce_v6
from kio.schema.produce import v7 as produce_v7
from kio.schema.produce import v8 as produce_v8
from kio.schema.produce import v9 as produce_v9
from kio.schema.sasl_authenticate import v0 as sasl_authenticate_v0
from kio.schema.sasl_authenticate import v1 as sasl_authenticate_v1
from kio.schema.sasl_authenticate import v2 as sasl_authenticate_v2
from kio.schema.sasl_handshake import v1 as sasl_handshake_v1
from kio.schema.sync_group import v0 as sync_group_v0
from kio.schema.sync_group import v1 as sync_group_v1
from kio.schema.sync_group import v2 as sync_group_v2
from kio.schema.sync_group import v3 as sync_group_v3
from kio.schema.sync_group import v4 as sync_group_v4
from kio.schema.sync_group import v5 as sync_group_v5

ProduceRequest = (
    produce_v3.ProduceRequest
    | produce_v4.ProduceRequest
    | produce_v5.ProduceRequest
    | produce_v6.ProduceRequest
    | produce_v7.ProduceRequest
    | produce_v8.ProduceRequest
    | produce_v9.ProduceRequest
)
FetchRequest = (
    fetch_v4.FetchRequest
    | fetch_v5.FetchRequest
    | fetch_v6.FetchRequest
    | fetch_v7.FetchRequest
    | fetch_v8.FetchRequest
    | fetch_v9.FetchRequest
    | fetch_v10.FetchRequest
    | fetch_v11.FetchRequest
    | fetch_v12.FetchRequest
)
ListOffsetsRequest = (
    list_offsets_v1.ListOffsetsRequest
    | list_offsets_v2.ListOffsetsRequest
    | list_offsets_v3.ListOffsetsRequest
    | list_offsets_v4.ListOffsetsRequest
    | list_offsets_v5.ListOffsetsRequest
    | list_offsets_v6.ListOffsetsRequest
    | list_offsets_v7.ListOffsetsRequest
)
MetadataRequest = (
    metadata_v0.MetadataRequest
    | metadata_v1.MetadataRequest
    | metadata_v2.MetadataRequest
    | metadata_v3.MetadataRequest
    | metadata_v4.MetadataRequest
    | metadata_v5.MetadataRequest
    | metadata_v6.MetadataRequest
    | metadata_v7.MetadataRequest
    | metadata_v8.MetadataRequest
    | metadata_v9.MetadataRequest
    | metadata_v10.MetadataRequest
    | metadata_v11.MetadataRequest
    | metadata_v12.MetadataRequest
)
OffsetCommitRequest = (
    offset_commit_v2.OffsetCommitRequest
    | offset_commit_v3.OffsetCommitRequest
    | offset_commit_v4.OffsetCommitRequest
    | offset_commit_v5.OffsetCommitRequest
    | offset_commit_v6.OffsetCommitRequest
    | offset_commit_v7.OffsetCommitRequest
    | offset_commit_v8.OffsetCommitRequest
)
OffsetFetchRequest = (
    offset_fetch_v1.OffsetFetchRequest
    | offset_fetch_v2.OffsetFetchRequest
    | offset_fetch_v3.OffsetFetchRequest
    | offset_fetch_v4.OffsetFetchRequest
    | offset_fetch_v5.OffsetFetchRequest
    | offset_fetch_v6.OffsetFetchRequest
    | offset_fetch_v7.OffsetFetchRequest
)
FindCoordinatorRequest = (
    find_coordinator_v0.FindCoordinatorRequest
    | find_coordinator_v1.FindCoordinatorRequest
    | find_coordinator_v2.FindCoordinatorRequest
    | find_coordinator_v3.FindCoordinatorRequest
    | find_coordinator_v4.FindCoordinatorRequest
)
JoinGroupRequest = (
    join_group_v0.JoinGroupRequest
    | join_group_v1.JoinGroupRequest
    | join_group_v2.JoinGroupRequest
    | join_group_v3.JoinGroupRequest
    | join_group_v4.JoinGroupRequest
    | join_group_v5.JoinGroupRequest
    | join_group_v6.JoinGroupRequest
    | join_group_v7.JoinGroupRequest
)
HeartbeatRequest = (
    heartbeat_v0.HeartbeatRequest
    | heartbeat_v1.HeartbeatRequest
    | heartbeat_v2.HeartbeatRequest
    | heartbeat_v3.HeartbeatRequest
    | heartbeat_v4.HeartbeatRequest
)
LeaveGroupRequest = (
    leave_group_v0.LeaveGroupRequest
    | leave_group_v1.LeaveGroupRequest
    | leave_group_v2.LeaveGroupRequest
    | leave_group_v3.LeaveGroupRequest
    | leave_group_v4.LeaveGroupRequest
    | leave_group_v5.LeaveGroupRequest
)
SyncGroupRequest = (
    sync_group_v0.SyncGroupRequest
    | sync_group_v1.SyncGroupRequest
    | sync_group_v2.SyncGroupRequest
    | sync_group_v3.SyncGroupRequest
    | sync_group_v4.SyncGroupRequest
    | sync_group_v5.SyncGroupRequest
)
DescribeGroupsRequest = (
    describe_groups_v0.DescribeGroupsRequest
    | describe_groups_v1.DescribeGroupsRequest
    | describe_groups_v2.DescribeGroupsRequest
    | describe_groups_v3.DescribeGroupsRequest
    | describe_groups_v4.DescribeGroupsRequest
    | describe_groups_v5.DescribeGroupsRequest
)
ListGroupsRequest = (
    list_groups_v0.ListGroupsRequest
    | list_groups_v1.ListGroupsRequest
    | list_groups_v2.ListGroupsRequest
    | list_groups_v3.ListGroupsRequest
    | list_groups_v4.ListGroupsRequest
)
SaslHandshakeRequest = sasl_handshake_v1.SaslHandshakeRequest
ApiVersionsRequest = (
    api_versions_v0.ApiVersionsRequest
    | api_versions_v1.ApiVersionsRequest
    | api_versions_v2.ApiVersionsRequest
    | api_versions_v3.ApiVersionsRequest
)
CreateTopicsRequest = (
    create_topics_v2.CreateTopicsRequest
    | create_topics_v3.CreateTopicsRequest
    | create_topics_v4.CreateTopicsRequest
    | create_topics_v5.CreateTopicsRequest
    | create_topics_v6.CreateTopicsRequest
    | create_topics_v7.CreateTopicsRequest
)
DeleteTopicsRequest = (
    delete_topics_v1.DeleteTopicsRequest
    | delete_topics_v2.DeleteTopicsRequest
    | delete_topics_v3.DeleteTopicsRequest
    | delete_topics_v4.DeleteTopicsRequest
    | delete_topics_v5.DeleteTopicsRequest
)
DeleteRecordsRequest = (
    delete_records_v0.DeleteRecordsRequest
    | delete_records_v1.DeleteRecordsRequest
    | delete_records_v2.DeleteRecordsRequest
)
InitProducerIdRequest = (
    init_producer_id_v0.InitProducerIdRequest
    | init_producer_id_v1.InitProducerIdRequest
    | init_producer_id_v2.InitProducerIdRequest
    | init_producer_id_v3.InitProducerIdRequest
    | init_producer_id_v4.InitProducerIdRequest
)
OffsetForLeaderEpochRequest = (
    offset_for_leader_epoch_v2.OffsetForLeaderEpochRequest
    | offset_for_leader_epoch_v3.OffsetForLeaderEpochRequest
    | offset_for_leader_epoch_v4.OffsetForLeaderEpochRequest
)
DescribeAclsRequest = (
    describe_acls_v1.DescribeAclsRequest
    | describe_acls_v2.DescribeAclsRequest
    | describe_acls_v3.DescribeAclsRequest
)
CreateAclsRequest = (
    create_acls_v1.CreateAclsRequest
    | create_acls_v2.CreateAclsRequest
    | create_acls_v3.CreateAclsRequest
)
DeleteAclsRequest = (
    delete_acls_v1.DeleteAclsRequest
    | delete_acls_v2.DeleteAclsRequest
    | delete_acls_v3.DeleteAclsRequest
)
DescribeConfigsRequest = (
    describe_configs_v1.DescribeConfigsRequest
    | describe_configs_v2.DescribeConfigsRequest
    | describe_configs_v3.DescribeConfigsRequest
    | describe_configs_v4.DescribeConfigsRequest
)
AlterConfigsRequest = (
    alter_configs_v0.AlterConfigsRequest
    | alter_configs_v1.AlterConfigsRequest
    | alter_configs_v2.AlterConfigsRequest
)
SaslAuthenticateRequest = (
    sasl_authenticate_v0.SaslAuthenticateRequest
    | sasl_authenticate_v1.SaslAuthenticateRequest
    | sasl_authenticate_v2.SaslAuthenticateRequest
)
CreatePartitionsRequest = (
    create_partitions_v0.CreatePartitionsRequest
    | create_partitions_v1.CreatePartitionsRequest
    | create_partitions_v2.CreatePartitionsRequest
    | create_partitions_v3.CreatePartitionsRequest
)
DeleteGroupsRequest = (
    delete_groups_v0.DeleteGroupsRequest
    | delete_groups_v1.DeleteGroupsRequest
    | delete_groups_v2.DeleteGroupsRequest
)
ElectLeadersRequest = (
    elect_leaders_v0.ElectLeadersRequest
    | elect_leaders_v1.ElectLeadersRequest
    | elect_leaders_v2.ElectLeadersRequest
)
IncrementalAlterConfigsRequest = (
    incremental_alter_configs_v0.IncrementalAlterConfigsRequest
    | incremental_alter_configs_v1.IncrementalAlterConfigsRequest
)
DescribeClientQuotasRequest = (
    describe_client_quotas_v0.DescribeClientQuotasRequest
    | describe_client_quotas_v1.DescribeClientQuotasRequest
)
AlterClientQuotasRequest = (
    alter_client_quotas_v0.AlterClientQuotasRequest
    | alter_client_quotas_v1.AlterClientQuotasRequest
)
DescribeClusterRequest = (
    describe_cluster_v0.DescribeClusterRequest | describe_cluster_v1.DescribeClusterRequest
)
ConsumerGroupHeartbeatRequest = (
    consumer_group_heartbeat_v0.ConsumerGroupHeartbeatRequest
    | consumer_group_heartbeat_v1.ConsumerGroupHeartbeatRequest
)
ConsumerGroupDescribeRequest = (
    consumer_group_describe_v0.ConsumerGroupDescribeRequest
    | consumer_group_describe_v1.ConsumerGroupDescribeRequest
)

# version ranges a translation tells apart by isinstance
FindCoordinatorBatched = find_coordinator_v4.FindCoordinatorRequest  # v4+: coordinator_keys
LeaveGroupBatched = (  # v3+: members
    leave_group_v3.LeaveGroupRequest
    | leave_group_v4.LeaveGroupRequest
    | leave_group_v5.LeaveGroupRequest
)

"""One exception class per wire error code, written out (not generated at run time, so type
checkers and readers see them). `tests/unit/client/test_errors.py` checks them against
`ErrorCode` and `RETRIABLE`: a code added there needs its class here. Import from
client/errors.py, which re-exports them.
"""

from __future__ import annotations

from client.errors_base import BrokerResponseError, ErrorCode


class UnknownServerError(BrokerResponseError):
    code = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(BrokerResponseError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptRecordError(BrokerResponseError):
    code = ErrorCode.CORRUPT_MESSAGE
    retriable = True


class UnknownTopicOrPartitionError(BrokerResponseError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    retriable = True


class InvalidFetchSizeError(BrokerResponseError):
    code = ErrorCode.INVALID_FETCH_SIZE


class LeaderNotAvailableError(BrokerResponseError):
    code = ErrorCode.LEADER_NOT_AVAILABLE
    retriable = True


class NotLeaderOrFollowerError(BrokerResponseError):
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    retriable = True


class RequestTimedOutError(BrokerResponseError):
    code = ErrorCode.REQUEST_TIMED_OUT
    retriable = True


class BrokerNotAvailableError(BrokerResponseError):
    code = ErrorCode.BROKER_NOT_AVAILABLE


class ReplicaNotAvailableError(BrokerResponseError):
    code = ErrorCode.REPLICA_NOT_AVAILABLE
    retriable = True


class MessageTooLargeError(BrokerResponseError):
    code = ErrorCode.MESSAGE_TOO_LARGE


class StaleControllerEpochError(BrokerResponseError):
    code = ErrorCode.STALE_CONTROLLER_EPOCH


class OffsetMetadataTooLargeError(BrokerResponseError):
    code = ErrorCode.OFFSET_METADATA_TOO_LARGE


class NetworkExceptionError(BrokerResponseError):
    code = ErrorCode.NETWORK_EXCEPTION
    retriable = True


class CoordinatorLoadInProgressError(BrokerResponseError):
    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    retriable = True


class CoordinatorNotAvailableError(BrokerResponseError):
    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    retriable = True


class NotCoordinatorError(BrokerResponseError):
    code = ErrorCode.NOT_COORDINATOR
    retriable = True


class InvalidTopicError(BrokerResponseError):
    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class RecordListTooLargeError(BrokerResponseError):
    code = ErrorCode.RECORD_LIST_TOO_LARGE


class NotEnoughReplicasError(BrokerResponseError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS
    retriable = True


class NotEnoughReplicasAfterAppendError(BrokerResponseError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    retriable = True


class InvalidRequiredAcksError(BrokerResponseError):
    code = ErrorCode.INVALID_REQUIRED_ACKS


class IllegalGenerationError(BrokerResponseError):
    code = ErrorCode.ILLEGAL_GENERATION


class InconsistentGroupProtocolError(BrokerResponseError):
    code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL


class InvalidGroupIdError(BrokerResponseError):
    code = ErrorCode.INVALID_GROUP_ID


class UnknownMemberIdError(BrokerResponseError):
    code = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidSessionTimeoutError(BrokerResponseError):
    code = ErrorCode.INVALID_SESSION_TIMEOUT


class RebalanceInProgressError(BrokerResponseError):
    code = ErrorCode.REBALANCE_IN_PROGRESS
    retriable = True


class InvalidCommitOffsetSizeError(BrokerResponseError):
    code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE


class TopicAuthorizationFailedError(BrokerResponseError):
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupAuthorizationFailedError(BrokerResponseError):
    code = ErrorCode.GROUP_AUTHORIZATION_FAILED


class ClusterAuthorizationFailedError(BrokerResponseError):
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class InvalidTimestampError(BrokerResponseError):
    code = ErrorCode.INVALID_TIMESTAMP


class UnsupportedSaslMechanismError(BrokerResponseError):
    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class IllegalSaslStateError(BrokerResponseError):
    code = ErrorCode.ILLEGAL_SASL_STATE


class UnsupportedVersionError(BrokerResponseError):
    code = ErrorCode.UNSUPPORTED_VERSION


class TopicAlreadyExistsError(BrokerResponseError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(BrokerResponseError):
    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(BrokerResponseError):
    code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(BrokerResponseError):
    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidConfigError(BrokerResponseError):
    code = ErrorCode.INVALID_CONFIG


class NotControllerError(BrokerResponseError):
    code = ErrorCode.NOT_CONTROLLER
    retriable = True


class InvalidRequestError(BrokerResponseError):
    code = ErrorCode.INVALID_REQUEST


class UnsupportedForMessageFormatError(BrokerResponseError):
    code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


class PolicyViolationError(BrokerResponseError):
    code = ErrorCode.POLICY_VIOLATION


class OutOfOrderSequenceNumberError(BrokerResponseError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceNumberError(BrokerResponseError):
    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(BrokerResponseError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(BrokerResponseError):
    code = ErrorCode.INVALID_TXN_STATE


class InvalidProducerIdMappingError(BrokerResponseError):
    code = ErrorCode.INVALID_PRODUCER_ID_MAPPING


class InvalidTransactionTimeoutError(BrokerResponseError):
    code = ErrorCode.INVALID_TRANSACTION_TIMEOUT


class ConcurrentTransactionsError(BrokerResponseError):
    code = ErrorCode.CONCURRENT_TRANSACTIONS
    retriable = True


class TransactionCoordinatorFencedError(BrokerResponseError):
    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class TransactionalIdAuthorizationFailedError(BrokerResponseError):
    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class SecurityDisabledError(BrokerResponseError):
    code = ErrorCode.SECURITY_DISABLED


class OperationNotAttemptedError(BrokerResponseError):
    code = ErrorCode.OPERATION_NOT_ATTEMPTED


class KafkaStorageError(BrokerResponseError):
    code = ErrorCode.KAFKA_STORAGE_ERROR
    retriable = True


class LogDirNotFoundError(BrokerResponseError):
    code = ErrorCode.LOG_DIR_NOT_FOUND


class SaslAuthenticationFailedError(BrokerResponseError):
    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class UnknownProducerIdError(BrokerResponseError):
    code = ErrorCode.UNKNOWN_PRODUCER_ID


class ReassignmentInProgressError(BrokerResponseError):
    code = ErrorCode.REASSIGNMENT_IN_PROGRESS


class NonEmptyGroupError(BrokerResponseError):
    code = ErrorCode.NON_EMPTY_GROUP


class GroupIdNotFoundError(BrokerResponseError):
    code = ErrorCode.GROUP_ID_NOT_FOUND


class FetchSessionIdNotFoundError(BrokerResponseError):
    code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    retriable = True


class InvalidFetchSessionEpochError(BrokerResponseError):
    code = ErrorCode.INVALID_FETCH_SESSION_EPOCH
    retriable = True


class ListenerNotFoundError(BrokerResponseError):
    code = ErrorCode.LISTENER_NOT_FOUND
    retriable = True


class TopicDeletionDisabledError(BrokerResponseError):
    code = ErrorCode.TOPIC_DELETION_DISABLED


class FencedLeaderEpochError(BrokerResponseError):
    code = ErrorCode.FENCED_LEADER_EPOCH
    retriable = True


class UnknownLeaderEpochError(BrokerResponseError):
    code = ErrorCode.UNKNOWN_LEADER_EPOCH
    retriable = True


class UnsupportedCompressionTypeError(BrokerResponseError):
    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class StaleBrokerEpochError(BrokerResponseError):
    code = ErrorCode.STALE_BROKER_EPOCH


class OffsetNotAvailableError(BrokerResponseError):
    code = ErrorCode.OFFSET_NOT_AVAILABLE
    retriable = True


class MemberIdRequiredError(BrokerResponseError):
    code = ErrorCode.MEMBER_ID_REQUIRED


class PreferredLeaderNotAvailableError(BrokerResponseError):
    code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    retriable = True


class GroupMaxSizeReachedError(BrokerResponseError):
    code = ErrorCode.GROUP_MAX_SIZE_REACHED


class FencedInstanceIdError(BrokerResponseError):
    code = ErrorCode.FENCED_INSTANCE_ID


class EligibleLeadersNotAvailableError(BrokerResponseError):
    code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    retriable = True


class ElectionNotNeededError(BrokerResponseError):
    code = ErrorCode.ELECTION_NOT_NEEDED


class NoReassignmentInProgressError(BrokerResponseError):
    code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


class GroupSubscribedToTopicError(BrokerResponseError):
    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


class InvalidRecordError(BrokerResponseError):
    code = ErrorCode.INVALID_RECORD


class UnstableOffsetCommitError(BrokerResponseError):
    code = ErrorCode.UNSTABLE_OFFSET_COMMIT
    retriable = True


class ThrottlingQuotaExceededError(BrokerResponseError):
    code = ErrorCode.THROTTLING_QUOTA_EXCEEDED
    retriable = True


class ProducerFencedError(BrokerResponseError):
    code = ErrorCode.PRODUCER_FENCED


class ResourceNotFoundError(BrokerResponseError):
    code = ErrorCode.RESOURCE_NOT_FOUND


class DuplicateResourceError(BrokerResponseError):
    code = ErrorCode.DUPLICATE_RESOURCE


class UnacceptableCredentialError(BrokerResponseError):
    code = ErrorCode.UNACCEPTABLE_CREDENTIAL


class InconsistentVoterSetError(BrokerResponseError):
    code = ErrorCode.INCONSISTENT_VOTER_SET


class InvalidUpdateVersionError(BrokerResponseError):
    code = ErrorCode.INVALID_UPDATE_VERSION


class FeatureUpdateFailedError(BrokerResponseError):
    code = ErrorCode.FEATURE_UPDATE_FAILED


class PrincipalDeserializationFailureError(BrokerResponseError):
    code = ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE


class SnapshotNotFoundError(BrokerResponseError):
    code = ErrorCode.SNAPSHOT_NOT_FOUND


class PositionOutOfRangeError(BrokerResponseError):
    code = ErrorCode.POSITION_OUT_OF_RANGE


class UnknownTopicIdError(BrokerResponseError):
    code = ErrorCode.UNKNOWN_TOPIC_ID
    retriable = True


class DuplicateBrokerRegistrationError(BrokerResponseError):
    code = ErrorCode.DUPLICATE_BROKER_REGISTRATION


class BrokerIdNotRegisteredError(BrokerResponseError):
    code = ErrorCode.BROKER_ID_NOT_REGISTERED


class InconsistentTopicIdError(BrokerResponseError):
    code = ErrorCode.INCONSISTENT_TOPIC_ID


class InconsistentClusterIdError(BrokerResponseError):
    code = ErrorCode.INCONSISTENT_CLUSTER_ID


class TransactionalIdNotFoundError(BrokerResponseError):
    """DescribeTransactions: the coordinator knows no transaction with this id."""

    code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


class IneligibleReplicaError(BrokerResponseError):
    """AlterPartition: the new ISR adds a broker that is fenced or in a controlled shutdown
    (KIP-841)."""

    code = ErrorCode.INELIGIBLE_REPLICA


class FencedMemberEpochError(BrokerResponseError):
    code = ErrorCode.FENCED_MEMBER_EPOCH


class UnreleasedInstanceIdError(BrokerResponseError):
    code = ErrorCode.UNRELEASED_INSTANCE_ID


class UnsupportedAssignorError(BrokerResponseError):
    code = ErrorCode.UNSUPPORTED_ASSIGNOR


class StaleMemberEpochError(BrokerResponseError):
    code = ErrorCode.STALE_MEMBER_EPOCH


_BY_CODE: dict[int, type[BrokerResponseError]] = {
    int(cls.code): cls for cls in BrokerResponseError.__subclasses__()
}


def error_for_code(code: int) -> type[BrokerResponseError]:
    """The exception class for a wire error code (UnknownServerError for unknown numbers)."""
    return _BY_CODE.get(code, UnknownServerError)


def raise_for_code(code: int, message: str = "") -> None:
    """Raise the exception for `code`; do nothing for NONE."""
    if code != 0:
        raise error_for_code(code)(message)

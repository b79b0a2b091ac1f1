"""The BROKER_LOGGER config resource (KIP-412): this node's log levels, read with DescribeConfigs and changed at
runtime with IncrementalAlterConfigs (``kafka-configs --entity-type broker-loggers``; a broker's, or with
``--bootstrap-controller`` a controller's, KIP-919), as Kafka's
RuntimeLoggerManager and LoggingController do it over log4j.

klog's loggers are Python ``logging`` loggers (``klog.broker.server``, ``klog.controller.raft``, ...; ``root`` is
the root logger). A level is named as Kafka names it (OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE, ALL) and mapped
to Python's: WARN is WARNING, FATAL is CRITICAL, TRACE and ALL are below DEBUG, OFF above CRITICAL. A change
lives in this process only: a restart brings back the levels of ``--log-level``, as Kafka's log4j levels are not
persisted either.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from klog.protocol.errors import ErrorCode
from klog.protocol.struct import field_of

log = logging.getLogger("klog.broker.loggers")

ROOT_LOGGER = "root"

#: Kafka's level names (LogLevelConfig.VALID_LOG_LEVELS) -> Python's levels
LEVELS: dict[str, int] = {"OFF": logging.CRITICAL + 10, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR,
                          "WARN": logging.WARNING, "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": 5, "ALL": 1}
#: the levels a logger may be set to (Kafka's LogLevelConfig.VALID_LOG_LEVELS: neither OFF nor ALL)
SETTABLE_LEVELS = frozenset(LEVELS) - {"OFF", "ALL"}
_VALID = ", ".join(sorted(SETTABLE_LEVELS))
#: IncrementalAlterConfigs' operations
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {_APPEND: "APPEND", _SUBTRACT: "SUBTRACT"}


class LoggerChange(Protocol):
    """One AlterableConfig of an IncrementalAlterConfigs resource."""

    name: str
    config_operation: int
    value: str | None


class LoggerChangeError(Exception):
    """A change Kafka refuses: its error code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def kafka_level(level: int) -> str:
    """Kafka's name of a Python level (the highest Kafka level at or below it)."""
    return next((name for name, value in sorted(LEVELS.items(), key=lambda kv: -kv[1]) if level >= value), "ALL")


def _logger(name: str) -> logging.Logger | None:
    """The logger ``name`` if it exists (the root logger for ``root``); None: no such logger."""
    if name == ROOT_LOGGER:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def loggers() -> dict[str, str]:
    """Every logger of this process, ``root`` first, with Kafka's name of its effective level (Kafka's
    LoggingController.loggers)."""
    root = logging.getLogger()
    found = {ROOT_LOGGER: kafka_level(root.level)}
    for name in sorted(logging.Logger.manager.loggerDict):
        logger = _logger(name)
        if logger is not None:
            found[name] = kafka_level(logger.getEffectiveLevel())
    return found


def _validate(changes: Iterable[LoggerChange]) -> None:
    """Kafka's RuntimeLoggerManager.validateLogLevelConfigs: only SET (of a known level) and DELETE (not of the
    root logger) of a logger that exists."""
    for change in changes:
        name, op = change.name, change.config_operation
        if op in (_SET, _DELETE) and _logger(name) is None:
            raise LoggerChangeError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
        if op == _SET:
            if change.value not in SETTABLE_LEVELS:
                raise LoggerChangeError(ErrorCode.INVALID_CONFIG, f"Cannot set the log level of {name} to "
                                        f"{change.value} as it is not a supported log level. Valid log levels are "
                                        f"{_VALID}")
        elif op == _DELETE:
            if name == ROOT_LOGGER:
                raise LoggerChangeError(ErrorCode.INVALID_REQUEST,
                                        f"Removing the log level of the {ROOT_LOGGER} logger is not allowed")
        elif op in _OP_NAMES:
            raise LoggerChangeError(ErrorCode.INVALID_REQUEST,
                                    f"{_OP_NAMES[op]} operation is not allowed for the BROKER_LOGGER resource")
        else:
            raise LoggerChangeError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {op} is not allowed for the "
                                    "BROKER_LOGGER resource")


def apply_changes(node_id: int, resource_name: str, changes: Iterable[LoggerChange], *,
                  validate_only: bool) -> None:
    """Apply one BROKER_LOGGER resource of IncrementalAlterConfigs (all of its changes or, when one is refused,
    none: a LoggerChangeError says why); ``validate_only``: check them only."""
    try:
        requested = int(resource_name)
    except ValueError:
        raise LoggerChangeError(ErrorCode.INVALID_REQUEST,
                                f"Node id must be an integer, but it is: {resource_name}") from None
    if requested != node_id:
        raise LoggerChangeError(ErrorCode.INVALID_REQUEST, f"Unexpected node id. Expected {node_id}, but received "
                                f"{resource_name}")
    items = list(changes)
    _validate(items)
    if validate_only:
        return
    for change in items:
        logger = _logger(change.name)
        assert logger is not None   # validated above
        if change.config_operation == _SET:
            assert change.value is not None
            logger.setLevel(LEVELS[change.value])
            log.warning("Updated the log level of %s to %s", change.name, change.value)
        else:
            logger.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", change.name)


def answer_changes(node_id: int, resource: Any, validate_only: bool) -> dict[str, Any]:
    """The IncrementalAlterConfigs answer of one BROKER_LOGGER resource, which the node it names applies itself
    (Kafka's RuntimeLoggerManager, on a broker or a controller: never forwarded, never persisted)."""
    code: int = ErrorCode.NONE
    message: str | None = None
    try:
        apply_changes(node_id, resource.resource_name, resource.configs, validate_only=validate_only)
    except LoggerChangeError as exc:
        code, message = exc.code, exc.message
    return {"error_code": code, "error_message": message, "resource_type": resource.resource_type,
            "resource_name": resource.resource_name}


def in_request_order(resources: list[Any], answered_here: dict[int, Any], decided: list[Any]) -> list[Any]:
    """The answers of a request's resources in its order, as Kafka's ConfigAdminManager reassembles them: those
    this broker answered (by index) among the controller's (by resource: a resource named twice is answered
    here)."""
    by_resource = {(field_of(item, "resource_type"), field_of(item, "resource_name")): item for item in decided}
    ordered = []
    for index, resource in enumerate(resources):
        here = answered_here.get(index)
        ordered.append(here if here is not None
                       else by_resource.pop((resource.resource_type, resource.resource_name), None))
    return [item for item in ordered if item is not None] + [*by_resource.values()]

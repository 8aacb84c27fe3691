from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class AccessControlEntryRecord(_message.Message):
    __slots__ = ("id", "resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int
    def __init__(self, id: _Optional[str] = ..., resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[int] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[int] = ..., permission_type: _Optional[int] = ...) -> None: ...

class RemoveAccessControlEntryRecord(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

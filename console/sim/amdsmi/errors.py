"""amdsmi's exceptions, with the real wrapper's texts and error codes."""

from .enums import Status

_ERROR_TEXT = {
    Status.INVAL: "Invalid parameters",
    Status.NOT_SUPPORTED: "Feature not supported",
    Status.TIMEOUT: "Timeout in API call",
    Status.RETRY: "Retry operation",
    Status.NO_PERM: "Permission Denied",
    Status.INIT_ERROR: "Initialization error",
    Status.BUSY: "Device busy",
    Status.NOT_FOUND: "Device Not found",
    Status.NOT_INIT: "Device not initialized",
    Status.DRIVER_NOT_LOADED: "Driver not loaded",
    Status.NO_DATA: "No data was found for given input",
    Status.INSUFFICIENT_SIZE: "Insufficient size for operation",
    Status.UNEXPECTED_DATA: "The data read or provided was unexpected",
    Status.AMDGPU_RESTART_ERR: "AMDGPU restart failed",
    Status.SETTING_UNAVAILABLE: "Setting is not available",
}


class AmdSmiException(Exception):
    """Base class of every amdsmi exception."""


class AmdSmiLibraryException(AmdSmiException):
    """A non-success status from the library; `detail` is a simulator-only extra."""

    def __init__(self, err_code, detail=None):
        err_code = abs(int(err_code))
        super().__init__(err_code)
        self.err_code = err_code
        try:
            name = Status(err_code).name
        except ValueError:
            name = "UNKNOWN_ERROR"
        text = _ERROR_TEXT.get(err_code, "An unknown error occurred")
        self.err_info = "AMDSMI_STATUS_{} - {}".format(name, text)
        if detail:
            self.err_info += " (sim: {})".format(detail)

    def __str__(self):
        return "Error code:\n\t{} | {}".format(self.err_code, self.err_info)

    def get_error_info(self):
        return self.err_info

    def get_error_code(self):
        return self.err_code


class AmdSmiRetryException(AmdSmiLibraryException):
    def __init__(self, detail=None):
        super().__init__(Status.RETRY, detail)


class AmdSmiTimeoutException(AmdSmiLibraryException):
    def __init__(self, detail=None):
        super().__init__(Status.TIMEOUT, detail)


class AmdSmiParameterException(AmdSmiException):
    """A Python argument of the wrong type (checked before the library is called)."""

    def __init__(self, receivedValue, expectedType, msg=None):
        super().__init__(msg)
        self.err_code = None
        self.actualType = type(receivedValue)
        self.expectedType = expectedType
        self.err_msg = msg or "Invalid parameter:\nActual type: {}\nExpected type: {}".format(
            self.actualType, expectedType
        )

    def __str__(self):
        return self.err_msg


def error_for(code, detail=None):
    """The exception class the real wrapper raises for `code`."""
    if code == Status.RETRY:
        return AmdSmiRetryException(detail)
    if code == Status.TIMEOUT:
        return AmdSmiTimeoutException(detail)
    return AmdSmiLibraryException(code, detail)

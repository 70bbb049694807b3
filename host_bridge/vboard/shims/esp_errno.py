# The ESP32 port's errno module (vboot installs it as `errno` and `uerrno`). That port raises the errno values of
# ESP-IDF's newlib (sys/errno.h; MicroPython pull request 6613, in since v1.15), which lwIP's sockets use too, and
# its errno module names the set MicroPython's does everywhere. Above 34 they are not the Linux numbers the Unix
# port raises: ETIMEDOUT is 116 (110 on Linux), ECONNABORTED 113 (103), EHOSTUNREACH 118 (113), EINPROGRESS 119
# (115). Code that compares an OSError's number with a list of its own (mqtt_as keeps lwIP's) sees the chip's
# numbers: the shims raise these (socket.py turns a host socket's number into the chip's).
EPERM = 1
ENOENT = 2
EIO = 5
EBADF = 9
EAGAIN = 11
ENOMEM = 12
EACCES = 13
EEXIST = 17
ENODEV = 19
EISDIR = 21
EINVAL = 22
EOPNOTSUPP = 95
ECONNRESET = 104
ENOBUFS = 105
ECONNREFUSED = 111
EADDRINUSE = 112
ECONNABORTED = 113
ETIMEDOUT = 116
EHOSTUNREACH = 118
EINPROGRESS = 119
EALREADY = 120
ENOTCONN = 128

errorcode = {
    EPERM: "EPERM", ENOENT: "ENOENT", EIO: "EIO", EBADF: "EBADF", EAGAIN: "EAGAIN", ENOMEM: "ENOMEM",
    EACCES: "EACCES", EEXIST: "EEXIST", ENODEV: "ENODEV", EISDIR: "EISDIR", EINVAL: "EINVAL",
    EOPNOTSUPP: "EOPNOTSUPP", ECONNRESET: "ECONNRESET", ENOBUFS: "ENOBUFS", ECONNREFUSED: "ECONNREFUSED",
    EADDRINUSE: "EADDRINUSE", ECONNABORTED: "ECONNABORTED", ETIMEDOUT: "ETIMEDOUT", EHOSTUNREACH: "EHOSTUNREACH",
    EINPROGRESS: "EINPROGRESS", EALREADY: "EALREADY", ENOTCONN: "ENOTCONN",
}  # fmt: skip

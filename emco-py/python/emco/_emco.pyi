"""The native half of `emco`: requests of EMCO's REST API, to a server or in process."""

from os import PathLike
from typing import Optional, Sequence, Tuple, Union

__version__: str

_Answer = Tuple[int, Optional[str], bytes]

class Transport:
    @staticmethod
    def remote(
        url: str,
        token: Optional[str] = None,
        ca_cert: Optional[Union[str, PathLike[str]]] = None,
        insecure: bool = False,
    ) -> "Transport": ...
    @staticmethod
    def embedded(data_dir: Optional[Union[str, PathLike[str]]] = None) -> "Transport": ...
    @property
    def is_embedded(self) -> bool: ...
    def close(self) -> None: ...
    def url(self, path: str) -> str: ...
    def request(self, method: str, path: str, body: Optional[bytes] = None) -> _Answer: ...
    def upload(
        self,
        method: str,
        path: str,
        metadata: bytes,
        files: Sequence[Tuple[str, str, Union[str, PathLike[str]]]],
    ) -> _Answer: ...
    def run_file(
        self,
        path: Union[str, PathLike[str]],
        command: str = "apply",
        values: Optional[bytes] = None,
        wait_seconds: float = 0.0,
    ) -> bytes: ...

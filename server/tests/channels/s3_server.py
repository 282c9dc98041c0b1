"""An S3-compatible server on the loopback for the tests of Holdpoint's file storage: moto's, on a free port, with
one bucket made. Prints `listening <port>` once it serves, then serves until stdin closes (the test ends)."""

import sys

import boto3
from moto.server import ThreadedMotoServer


def main() -> None:
    bucket = sys.argv[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    client = boto3.client(
        "s3",
        endpoint_url=f"http://{host}:{port}",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    client.create_bucket(Bucket=bucket)
    print(f"listening {port}", flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()

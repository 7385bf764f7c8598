"""boto3's sagemaker-runtime client against lmx-server: invoke_endpoint and
invoke_endpoint_with_response_stream (AWS event-stream framing), plus a 400 as ClientError."""
import json
import sys

from harness import SKIP, Checks, Server, args_from_argv

try:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError
except ImportError:
    print("SKIP: boto3 is not installed (apt-get install python3-boto3)")
    sys.exit(SKIP)


def main():
    a = args_from_argv()
    c = Checks("e2e_boto3")
    with Server(a.server, a.plugin, a.model_dir) as s:
        client = boto3.client("sagemaker-runtime", endpoint_url=s.url, region_name="us-east-1",
                              aws_access_key_id="test", aws_secret_access_key="test",
                              config=Config(retries={"max_attempts": 1}))
        body = json.dumps({"inputs": "Once upon a time",
                           "parameters": {"max_new_tokens": 10, "details": True}})
        r = client.invoke_endpoint(EndpointName="lmx", Body=body, ContentType="application/json")
        out = json.loads(r["Body"].read())
        c.check(r["ContentType"].startswith("application/json"), f"content type {r['ContentType']}")
        c.check(isinstance(out["generated_text"], str) and out["details"]["generated_tokens"] >= 1,
                f"invoke_endpoint {out}")

        r = client.invoke_endpoint_with_response_stream(
            EndpointName="lmx", Body=json.dumps({"inputs": "Once upon a time",
                                                 "parameters": {"max_new_tokens": 10}}),
            ContentType="application/json")
        data = b""
        events = 0
        for event in r["Body"]:
            if "PayloadPart" in event:
                data += event["PayloadPart"]["Bytes"]
                events += 1
        lines = [json.loads(x) for x in data.decode().splitlines() if x]
        c.check(events >= 1 and lines and "generated_text" in lines[-1], f"stream {events} {lines}")
        c.check("".join(x["token"]["text"] for x in lines if "token" in x) ==
                lines[-1]["generated_text"], "stream text adds up")
        c.check(lines[-1]["generated_text"] == out["generated_text"], "stream == invoke (greedy)")

        try:
            client.invoke_endpoint(EndpointName="lmx", Body='{"inputs": 5}',
                                   ContentType="application/json")
            c.check(False, "bad request accepted")
        except ClientError as e:
            status = e.response["ResponseMetadata"]["HTTPStatusCode"]
            c.check(status == 400, f"bad request -> {status}")
    c.done()


if __name__ == "__main__":
    main()

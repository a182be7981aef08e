def main() -> None:
    print("kvgate")

"""Print a greeting."""


def greeting(name: str) -> str:
    return f"Helo, {name}!"


if __name__ == "__main__":
    print(greeting("world"))

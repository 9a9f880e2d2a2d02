"""A chat loop in the terminal: each reply streams as it is generated, through the model's chat template.

    python examples/python/chat.py ~/.cache/reach/models/smollm2-135m-instruct

An empty line or Ctrl-D ends it; Ctrl-C stops the reply being written.
"""
import sys

import reach


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "~/.cache/reach/models/smollm2-135m-instruct"
    model = reach.Model(path, context=2048)
    messages = [{"role": "system", "content": "You are a concise, friendly assistant."}]
    while True:
        try:
            question = input("you> ").strip()
        except EOFError:
            break
        if not question:
            break
        messages.append({"role": "user", "content": question})
        reply = model.chat(messages, max_tokens=256, temperature=0.7, seed=len(messages), stream=True)
        print("bot> ", end="", flush=True)
        try:
            for piece in reply:
                print(piece, end="", flush=True)
        except KeyboardInterrupt:
            reply.close()
        print()
        messages.append({"role": "assistant", "content": reply.completion.text})


if __name__ == "__main__":
    main()

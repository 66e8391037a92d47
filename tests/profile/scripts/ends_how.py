"""Steps an env 6 times, then ends the way argv[1] says: osexit N | osexit_thread N | chdir DIR | fork."""
import os
import sys
import threading

import torch


class Env:
    num_envs = 4

    def __init__(self):
        self.x = torch.zeros(4)

    def step(self):
        self.x.add_(1)


def main():
    mode = sys.argv[1]
    env = Env()
    if mode == "chdir":  # a Hydra-style run: the working directory moves before training
        os.makedirs(sys.argv[2], exist_ok=True)
        os.chdir(sys.argv[2])
    if mode == "fork":  # a forked helper process that ends with os._exit, as multiprocessing's do
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        os.waitpid(pid, 0)
    for _ in range(6):
        env.step()
    print("stepped", flush=True)
    if mode == "osexit":
        os._exit(int(sys.argv[2]))
    if mode == "osexit_thread":
        t = threading.Thread(target=os._exit, args=(int(sys.argv[2]),))
        t.start()
        t.join()


if __name__ == "__main__":
    main()

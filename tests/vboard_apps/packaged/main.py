# Virtual-board test app: an application laid out as `mpremote mip install` lays a package out (lib/greet/), with
# a file put in a folder of its own (--put note.txt:data/note.txt).
import greet
from greet import words

with open("/flash/data/note.txt") as f:
    note = f.read().strip()
print("packaged %s %s %s" % (greet.hello(), words.WORD, note))
